"""Writing and loading checkpoints: state trees of tensors, arrays and bytes, written atomically with checksums."""
from __future__ import annotations

import io
import json
import os
import pickle
import re
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from numpy.lib import format as npy_format

import rlsup
from rlsup import paths
from rlsup.atomic import fsync_directory
from rlsup.checkpoint import directories, manifest as manifests, space
from rlsup.checkpoint.checksums import CHECKSUM_ALGORITHM, Checksum, safe_relative_path
from rlsup.checkpoint.manifest import FORMAT_VERSION, MANIFEST_FILE, REASONS, STATE_FILE, CheckpointEntry, NoSpace

TENSORS_FILE = "tensors.pt"
ARRAYS_DIR = "arrays"
BLOBS_DIR = "blobs"

# How leaves that JSON cannot hold are referenced from state.json. User dicts may not use these keys,
# so a one-key dict holding one of them is always a reference.
TENSOR_KEY = "__tensor__"
ARRAY_KEY = "__array__"
BYTES_KEY = "__bytes__"
INT_KEYS = "__intkeys__"  # a dict with int keys (torch optimizers' "state"); JSON objects only have str keys
RESERVED_KEYS = (TENSOR_KEY, ARRAY_KEY, BYTES_KEY, INT_KEYS)

# A write is cut into pieces so the checksum of one piece (helper thread) overlaps the write of the
# next; buffers below INLINE_CHECKSUM_BYTES are not worth a thread hop.
PIECE_BYTES = 8 << 20
INLINE_CHECKSUM_BYTES = 1 << 20
# A non-contiguous array is copied this many bytes at a time: far below 10% of a replay's size.
COPY_CHUNK_BYTES = 16 << 20


class CheckpointError(manifests.CheckpointProblem):
    """A checkpoint that cannot be written or is refused on load (failed checksum, newer format, missing file)."""


# ---------------------------------------------------------------------------------------------
# State trees → state.json plus tensors, arrays and blobs


class _Encoder:
    """Turns a state tree into JSON, collecting the leaves that JSON cannot hold.

    Tuples become lists: components must accept lists where they gave tuples. Dict keys must be all
    str or all int; anything else is refused rather than silently changed.
    """

    def __init__(self):
        self.tensors: dict[str, torch.Tensor] = {}
        self.arrays: list[tuple[str, np.ndarray]] = []
        self.blobs: list[tuple[str, bytes]] = []
        self.used_names: set[str] = set()

    def encode(self, value: Any, where: tuple = ()) -> Any:
        kind = type(value)
        if value is None or kind in (bool, int, float, str):
            return value
        if isinstance(value, dict):
            return self._encode_dict(value, where)
        if kind in (list, tuple) or isinstance(value, torch.Size):
            return [self.encode(item, where + (index,)) for index, item in enumerate(value)]
        if isinstance(value, torch.Tensor):
            return {TENSOR_KEY: self._add_tensor(value, where)}
        if isinstance(value, np.ndarray):
            return {ARRAY_KEY: self._add_array(value, where)}
        if kind in (bytes, bytearray):
            return {BYTES_KEY: self._add_blob(bytes(value), where)}
        if isinstance(value, np.generic):
            raise TypeError(f"state at {_describe(where)}: numpy scalar {value!r} ({kind.__name__}); "
                            "store a Python int/float/bool (.item()) or a 0-d array")
        raise TypeError(f"state at {_describe(where)}: cannot checkpoint a {kind.__module__}.{kind.__name__}; "
                        "leaves must be None, bool, int, float, str, list, tensor, ndarray or bytes")

    def _encode_dict(self, value: dict, where: tuple) -> dict:
        keys = list(value)
        if all(type(key) is str for key in keys):
            reserved = [key for key in keys if key in RESERVED_KEYS]
            if reserved:
                raise ValueError(f"state at {_describe(where)}: key {reserved[0]!r} is reserved "
                                 "by the checkpoint format")
            return {key: self.encode(item, where + (key,)) for key, item in value.items()}
        if all(type(key) is int for key in keys):
            return {INT_KEYS: {str(key): self.encode(item, where + (key,)) for key, item in value.items()}}
        kinds = sorted({type(key).__name__ for key in keys})
        raise TypeError(f"state at {_describe(where)}: dict keys must be all str or all int, "
                        f"found {', '.join(kinds)}")

    def _add_tensor(self, tensor: torch.Tensor, where: tuple) -> str:
        name = self._unique_name(where)
        tensor = tensor.detach()
        if tensor.device.type != "cpu":
            tensor = tensor.cpu()
        # torch.save writes a view's whole storage: a slice of a big buffer would save all of it.
        if tensor.layout == torch.strided and _storage_is_larger(tensor):
            tensor = tensor.clone()
        self.tensors[name] = tensor
        return name

    def _add_array(self, array: np.ndarray, where: tuple) -> str:
        if array.dtype.hasobject:
            raise TypeError(f"state at {_describe(where)}: arrays of Python objects (dtype {array.dtype}) "
                            "would need pickle; convert them to a numeric dtype")
        relative = f"{ARRAYS_DIR}/{self._unique_name(where)}.npy"
        self.arrays.append((relative, array))
        return relative

    def _add_blob(self, data: bytes, where: tuple) -> str:
        relative = f"{BLOBS_DIR}/{self._unique_name(where)}.bin"
        self.blobs.append((relative, data))
        return relative

    def _unique_name(self, where: tuple) -> str:
        """A readable file-safe name from the leaf's path (replay.frames), made unique case-insensitively."""
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", ".".join(str(part) for part in where))[:120] or "root"
        if base.startswith("."):
            base = "_" + base
        name, number = base, 1
        while name.lower() in self.used_names:
            number += 1
            name = f"{base}-{number}"
        self.used_names.add(name.lower())
        return name


def _storage_is_larger(tensor: torch.Tensor) -> bool:
    return tensor.untyped_storage().nbytes() > tensor.numel() * tensor.element_size()


def _describe(where: tuple) -> str:
    return ".".join(str(part) for part in where) or "the root"


class _Decoder:
    """Turns state.json back into a tree, resolving references to tensors, arrays and blobs."""

    def __init__(self, directory: Path, files: dict, tensors: dict):
        self.directory = directory
        self.files = files
        self.tensors = tensors

    def decode(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.decode(item) for item in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, inner), = value.items()
            if key in RESERVED_KEYS:
                return self._decode_reference(key, inner)
        return {key: self.decode(item) for key, item in value.items()}

    def _decode_reference(self, key: str, inner: Any) -> Any:
        if key == INT_KEYS:
            return {int(name): self.decode(item) for name, item in inner.items()}
        if key == TENSOR_KEY:
            if inner not in self.tensors:
                raise CheckpointError(f"checkpoint {self.directory}: tensor {inner!r} missing from {TENSORS_FILE}")
            return self.tensors[inner]
        path = self._listed_file(inner)
        if key == ARRAY_KEY:
            # A read-only memory map: a replay is copied once, into its owner's buffer, never twice.
            return np.load(path, mmap_mode="r", allow_pickle=False)
        return path.read_bytes()

    def _listed_file(self, relative: Any) -> Path:
        # Only files the manifest lists are read, so verification covered everything that is loaded.
        path = safe_relative_path(self.directory, relative)
        if path is None or relative not in self.files:
            raise CheckpointError(f"checkpoint {self.directory}: {relative!r} is not a file listed in its manifest")
        return path


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


def _npy_header(array: np.ndarray) -> bytes:
    """A standard .npy header; the data is always written in C order."""
    header = {"descr": npy_format.dtype_to_descr(array.dtype), "fortran_order": False, "shape": array.shape}
    buffer = io.BytesIO()
    try:
        npy_format.write_array_header_1_0(buffer, header)
    except ValueError:  # header longer than version 1.0 allows (huge structured dtypes)
        buffer = io.BytesIO()
        npy_format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def _write_array(handle: _ChecksummedFile, array: np.ndarray) -> None:
    """Header, then the data straight from the array's memory; a non-contiguous array in row chunks."""
    handle.write(_npy_header(array))
    if array.flags.c_contiguous:
        handle.write_retained(array.reshape(-1).view(np.uint8))  # the array lives until the checkpoint is done
        return
    row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    rows = max(1, COPY_CHUNK_BYTES // max(row_bytes, 1))
    for start in range(0, array.shape[0], rows):
        handle.write(np.ascontiguousarray(array[start:start + rows]).reshape(-1).view(np.uint8))


def _write_contents(directory: Path, encoder: _Encoder, state_text: bytes) -> dict:
    """Write every file of a checkpoint but the manifest; their manifest records by relative path."""
    files: dict[str, dict] = {}
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-checksum") as hasher:
        for subdirectory, items in ((ARRAYS_DIR, encoder.arrays), (BLOBS_DIR, encoder.blobs)):
            if items:
                (directory / subdirectory).mkdir(mode=0o700)
        for relative, array in encoder.arrays:
            _write_file(directory, relative, hasher, lambda handle, array=array: _write_array(handle, array), files)
        for relative, data in encoder.blobs:
            _write_file(directory, relative, hasher, lambda handle, data=data: handle.write(data), files)
        if encoder.tensors:
            _write_file(directory, TENSORS_FILE, hasher, lambda handle: torch.save(encoder.tensors, handle), files)
        _write_file(directory, STATE_FILE, hasher, lambda handle: handle.write(state_text), files)
    for subdirectory in (ARRAYS_DIR, BLOBS_DIR):
        if (directory / subdirectory).is_dir():
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
    encoder = _Encoder()
    state_text = (json.dumps(encoder.encode(state), separators=(",", ":")) + "\n").encode()
    extra = json.loads(json.dumps(extra or {}))
    parent = directories.checkpoints_parent(run_dir)
    directories.clean_leftovers(parent)
    needed = _bytes_needed(encoder, state_text)
    space.require(parent, needed)
    final = parent / paths.checkpoint_name(step, reason)
    temporary = directories.temporary_beside(final)
    temporary.mkdir(mode=0o700)
    try:
        files = _write_contents(temporary, encoder, state_text)
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


def _bytes_needed(encoder: _Encoder, state_text: bytes) -> int:
    """About what the checkpoint's files will take (torch's container adds a few kB)."""
    tensors = sum(tensor.numel() * tensor.element_size() for tensor in encoder.tensors.values())
    arrays = sum(array.nbytes for _, array in encoder.arrays)
    blobs = sum(len(data) for _, data in encoder.blobs)
    return tensors + arrays + blobs + len(state_text)


# ---------------------------------------------------------------------------------------------
# Loading


def load_checkpoint(checkpoint_dir: Path, *, verify: bool = True) -> tuple[dict, dict]:
    """(manifest, state tree) of a checkpoint; arrays come back as read-only memory maps.

    Refuses, with CheckpointError, a newer format or (when verify) any file failing its size or checksum.
    Nothing is unpickled: tensors load with weights_only=True, arrays with allow_pickle=False.
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
    files = manifest.get("files") or {}
    try:
        tree = json.loads((directory / STATE_FILE).read_text())
        tensors = _load_tensors(directory) if TENSORS_FILE in files else {}
        return manifest, _Decoder(directory, files, tensors).decode(tree)
    # UnpicklingError is what torch.load(weights_only=True) raises when it refuses an object. Its message advises
    # re-running with weights_only=False, which would run the file's code: never shown.
    except pickle.UnpicklingError:
        raise CheckpointError(f"checkpoint {directory} refused: {TENSORS_FILE} holds code (pickled objects other "
                              "than tensors), which rlsup never runs; nothing of it was loaded") from None
    except (OSError, ValueError, RuntimeError, AttributeError, TypeError) as error:
        raise CheckpointError(f"checkpoint {directory} cannot be loaded: {error}") from error


def _load_tensors(directory: Path) -> dict:
    tensors = torch.load(directory / TENSORS_FILE, weights_only=True, map_location="cpu")
    if not isinstance(tensors, dict):
        raise CheckpointError(f"checkpoint {directory}: {TENSORS_FILE} does not hold a dict of tensors")
    return tensors
