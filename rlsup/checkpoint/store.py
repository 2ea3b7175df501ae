"""A checkpoint directory as one transaction: files checksummed as written, the manifest last, one rename, rotation."""
from __future__ import annotations

import json
import os
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import rlsup
from rlsup import paths
from rlsup.atomic import fsync_directory
from rlsup.checkpoint import directories, manifest as manifests, space
from rlsup.checkpoint.checksums import CHECKSUM_ALGORITHM, Checksum
from rlsup.checkpoint.manifest import (FORMAT_VERSION, MANIFEST_FILE, REASONS, CheckpointEntry, CheckpointError,
                                       NoSpace)
from rlsup.checkpoint.tree import Encoder, load_tree

# A write is cut into pieces so the checksum of one piece (helper thread) overlaps the write of the
# next; buffers below INLINE_CHECKSUM_BYTES are not worth a thread hop.
PIECE_BYTES = 8 << 20
INLINE_CHECKSUM_BYTES = 1 << 20


# ---------------------------------------------------------------------------------------------
# Files written with their checksum computed from the same memory, never re-read


class _ChecksummedFile:
    """A new file whose checksum is computed, on a helper thread, from the very buffers being written.

    write() returns only when its buffer is both written and hashed, so the caller may free or reuse
    the buffer at once (torch.save hands out memoryviews of temporary memory). write_retained() is for
    a buffer that outlives the file (an array being checkpointed): its hashing may trail the write and
    finish while close() waits on fsync, when the CPU would otherwise be idle.
    """

    def __init__(self, path: Path, hasher: ThreadPoolExecutor):
        self.descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        self.hasher = hasher
        self.checksum = Checksum(CHECKSUM_ALGORITHM)
        self.size = 0
        self.pending: list[Future] = []

    def write(self, buffer) -> int:
        written = self.write_retained(buffer)
        self._wait_for_checksum()
        return written

    def write_retained(self, buffer) -> int:
        """Write buffer, which the caller keeps alive and unchanged until close()."""
        view = memoryview(buffer).cast("B")
        if view.nbytes < INLINE_CHECKSUM_BYTES and not self.pending:
            self.checksum.update(view)
            self._write_all(view)
        else:
            # One worker runs the updates in submission order, which a running checksum needs.
            for start in range(0, view.nbytes, PIECE_BYTES):
                piece = view[start:start + PIECE_BYTES]
                self.pending.append(self.hasher.submit(self.checksum.update, piece))
                self._write_all(piece)
        self.size += view.nbytes
        return view.nbytes

    def _wait_for_checksum(self) -> None:
        pending, self.pending = self.pending, []
        for future in pending:
            future.result()

    def _write_all(self, view: memoryview) -> None:
        while view.nbytes:
            written = os.write(self.descriptor, view)
            view = view[written:]

    def flush(self) -> None:
        """Nothing is buffered; torch.save calls this."""

    def close(self) -> dict:
        """fsync and close; the file's manifest record."""
        try:
            os.fsync(self.descriptor)
        finally:
            os.close(self.descriptor)
            self._wait_for_checksum()
        return {"bytes": self.size, "checksum": self.checksum.hexdigest()}

    def abandon(self) -> None:
        os.close(self.descriptor)
        self._wait_for_checksum()


def _write_file(directory: Path, relative: str, hasher: ThreadPoolExecutor,
                body: Callable[[_ChecksummedFile], None], files: dict) -> None:
    handle = _ChecksummedFile(directory / relative, hasher)
    try:
        body(handle)
    except BaseException:
        handle.abandon()
        raise
    files[relative] = handle.close()


def _write_contents(directory: Path, encoded: Encoder) -> dict:
    """Write every file of a checkpoint but the manifest; their manifest records by relative path."""
    files: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-checksum") as hasher:
        for subdirectory in encoded.directories():
            (directory / subdirectory).mkdir(mode=0o700)
        for relative, body in encoded.files():
            _write_file(directory, relative, hasher, body, files)
    for subdirectory in encoded.directories():
        fsync_directory(directory / subdirectory)
    return files


def _write_manifest(directory: Path, manifest: dict) -> None:
    data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
    descriptor = os.open(directory / MANIFEST_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view.nbytes:
            view = view[os.write(descriptor, view):]
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------------------------------
# Writing checkpoint directories


def write_checkpoint(run_dir: Path, state: dict, *, step: int, episodes: int, reason: str, fingerprint: str,
                     spec_sha256: str, metrics_bytes: int, keep: int, extra: dict | None = None) -> CheckpointEntry:
    """Write state as the checkpoint of step (replacing one at the same step), then rotate to keep.

    state is a tree of str-keyed (or int-keyed) dicts whose leaves are None, bool, int, float, str,
    lists, tensors, arrays or bytes. On load, tuples come back as lists, int keys as ints, tensors on
    the CPU and arrays as read-only memory maps: components must accept these back.
    """
    if reason not in REASONS:
        raise ValueError(f"checkpoint reason must be one of {', '.join(REASONS)}, not {reason!r}")
    if type(step) is not int or step < 0:
        raise ValueError(f"checkpoint step must be a non-negative int, not {step!r}")
    # Everything that can be refused is refused before the disk is touched.
    encoded = Encoder(state)
    extra = json.loads(json.dumps(extra or {}))
    parent = directories.checkpoints_parent(run_dir)
    directories.clean_leftovers(parent)
    needed = encoded.bytes_needed()
    space.require(parent, needed)
    final = parent / paths.checkpoint_name(step, reason)
    temporary = directories.temporary_beside(final)
    temporary.mkdir(mode=0o700)
    try:
        files = _write_contents(temporary, encoded)
        manifest = manifests.sealed({
            "format": FORMAT_VERSION, "rlsup_version": rlsup.__version__, "step": step, "episodes": episodes,
            "time": time.time(), "reason": reason, "spec_sha256": spec_sha256, "fingerprint": fingerprint,
            "metrics_bytes": metrics_bytes, "extra": extra, "checksum_algorithm": CHECKSUM_ALGORITHM,
            "files": files})
        _write_manifest(temporary, manifest)  # last: a directory without it does not exist
        fsync_directory(temporary)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if space.ran_out(error, parent, needed):
            raise NoSpace(space.message(parent, needed)) from None
        raise
    directories.install(temporary, final)
    directories.rotate_after_write(run_dir, keep, written=final)
    return CheckpointEntry.from_manifest(final, manifest)


# ---------------------------------------------------------------------------------------------
# Loading


def load_checkpoint(checkpoint_dir: Path, *, verify: bool = True) -> tuple[dict, dict]:
    """(manifest, state tree) of a checkpoint; arrays come back as read-only memory maps.

    Refuses, with CheckpointError, a newer format or (when verify) any file failing its size or checksum.
    Nothing is unpickled (tree.load_tree).
    """
    directory = Path(checkpoint_dir)
    manifest = manifests.read_manifest(directory)
    if manifest is None:
        raise CheckpointError(f"checkpoint {directory} refused: no valid {MANIFEST_FILE}")
    problem = manifests.manifest_problem(manifest)
    if problem is None and verify:
        problem = manifests.verify(directory)
    if problem is not None:
        raise CheckpointError(f"checkpoint {directory} refused: {problem}")
    return manifest, load_tree(directory, manifest.get("files") or {})
