"""Reading checkpoint manifests: listing, verifying and choosing checkpoints without torch or numpy."""
from __future__ import annotations

import hashlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rlsup import paths
from rlsup.runfiles import read_json

FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
STATE_FILE = "state.json"
REASONS = ("interval", "pause", "final", "preempt", "best")
# A best checkpoint holds the networks of the best evaluation so far, without the replay: it is for
# playing and exporting, so resuming and "latest" never pick it.
BEST = "best"

# crc32, not sha256, by measurement on the 2-core box this was built on (about 700 MB of arrays,
# written then fsynced): a plain write ran at 0.8-1.2 GB/s, crc32 alone at 2.9 GB/s, sha256 at 1.1 GB/s.
# With the hash on a helper thread overlapping the write and the final fsync, the checkpoint reached
# these fractions of the plain write's bytes/s: on a quiet machine sha256 0.68-0.79 and crc32
# 1.08-1.19; in four runs of bench/checkpoint_write.py beside other jobs, sha256 0.48-0.96 and crc32
# 0.69-1.06, crc32 ahead every time. sha256 misses the 0.8 budget of DESIGN section 9. The checksum
# guards against torn and bit-flipped files, not an adversary, so crc32 is enough; the fingerprint
# (sha256 of the parameters) is what compares runs.
CHECKSUM_ALGORITHM = "crc32"
SUPPORTED_CHECKSUMS = ("crc32", "sha256")

# Big enough that a read call costs little, small enough to stay far below any array's size.
READ_CHUNK_BYTES = 8 << 20


class CheckpointNotFound(ValueError):
    """No checkpoint matches what the user asked for."""


class Checksum:
    """An incremental checksum with one interface for crc32 and sha256."""

    def __init__(self, algorithm: str = CHECKSUM_ALGORITHM):
        if algorithm not in SUPPORTED_CHECKSUMS:
            raise ValueError(f"unsupported checksum algorithm {algorithm!r}")
        self.algorithm = algorithm
        self.crc = 0
        self.sha = hashlib.sha256() if algorithm == "sha256" else None

    def update(self, buffer) -> None:
        # Both release the GIL on large buffers, which is what lets a helper thread overlap the write.
        if self.sha is not None:
            self.sha.update(buffer)
        else:
            self.crc = zlib.crc32(buffer, self.crc)

    def hexdigest(self) -> str:
        return self.sha.hexdigest() if self.sha is not None else f"{self.crc:08x}"


@dataclass(frozen=True)
class CheckpointEntry:
    """One checkpoint directory as its manifest describes it."""

    path: Path
    step: int
    reason: str
    time: float
    bytes: int  # total size of the checkpoint's files
    fingerprint: str
    episodes: int
    metrics_bytes: int
    spec_sha256: str
    manifest: dict

    @classmethod
    def from_manifest(cls, path: Path, manifest: dict) -> CheckpointEntry:
        files = manifest.get("files") or {}
        return cls(path=Path(path), step=int(manifest["step"]), reason=str(manifest.get("reason", "")),
                   time=float(manifest.get("time", 0.0)),
                   bytes=sum(int(info.get("bytes", 0)) for info in files.values()),
                   fingerprint=str(manifest.get("fingerprint", "")),
                   episodes=int(manifest.get("episodes", 0)),
                   metrics_bytes=int(manifest.get("metrics_bytes", 0)),
                   spec_sha256=str(manifest.get("spec_sha256", "")), manifest=manifest)

    @property
    def evaluation_mean(self) -> float | None:
        """The evaluation that made a best checkpoint best; None for other checkpoints."""
        value = (self.manifest.get("extra") or {}).get("evaluation_mean")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    @property
    def label(self) -> str:
        """The reason as listings show it: a best checkpoint with the evaluation that made it best."""
        mean = self.evaluation_mean
        return f"best (eval {mean:g})" if self.reason == BEST and mean is not None else self.reason

    def to_json(self) -> dict:
        return {"step": self.step, "reason": self.reason, "path": str(self.path), "bytes": self.bytes,
                "fingerprint": self.fingerprint, "time": self.time, "episodes": self.episodes,
                "metrics_bytes": self.metrics_bytes, "spec_sha256": self.spec_sha256,
                "format": self.manifest.get("format"), "rlsup_version": self.manifest.get("rlsup_version"),
                "extra": self.manifest.get("extra", {}), "evaluation_mean": self.evaluation_mean,
                "label": self.label}


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / paths.CHECKPOINTS


def read_manifest(checkpoint_dir: Path) -> dict | None:
    """The manifest of a checkpoint directory, or None when it is missing, half-written or not an object."""
    return read_json(Path(checkpoint_dir) / MANIFEST_FILE)


def entry_of(checkpoint_dir: Path) -> CheckpointEntry | None:
    """The entry of a directory, or None when it holds no usable manifest (such a directory does not exist)."""
    manifest = read_manifest(checkpoint_dir)
    if manifest is None or not isinstance(manifest.get("files"), dict):
        return None
    try:
        return CheckpointEntry.from_manifest(checkpoint_dir, manifest)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def list_checkpoints(run_dir: Path) -> list[CheckpointEntry]:
    """Every checkpoint of a run in ascending step; temporary (dot) directories and directories without a
    valid manifest are skipped."""
    try:
        children = list(os.scandir(checkpoints_dir(run_dir)))
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries = []
    for child in children:
        if child.name.startswith(".") or not child.is_dir(follow_symlinks=False):
            continue
        entry = entry_of(Path(child.path))
        if entry is not None:
            entries.append(entry)
    return sorted(entries, key=lambda entry: (entry.step, entry.time))


def format_problem(manifest: dict) -> str | None:
    """Why this rlsup cannot read a manifest's format, or None when it can."""
    version = manifest.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        return f"unreadable format {version!r}"
    if version > FORMAT_VERSION:
        return f"format {version} is newer than this rlsup reads ({FORMAT_VERSION}); upgrade rlsup"
    if version < 1:
        return f"unknown format {version}"
    return None


def safe_relative_path(checkpoint_dir: Path, relative: object) -> Path | None:
    """checkpoint_dir / relative when relative stays inside the directory, else None."""
    if not isinstance(relative, str) or not relative:
        return None
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute() or any(part in ("", ".", "..") for part in parts):
        return None
    return Path(checkpoint_dir).joinpath(*parts)


def file_checksum(path: Path, algorithm: str) -> str:
    """Checksum of a file read in chunks, so verifying a large replay never holds it in memory."""
    checksum = Checksum(algorithm)
    buffer = bytearray(READ_CHUNK_BYTES)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as handle:
        while True:
            count = handle.readinto(buffer)
            if not count:
                break
            checksum.update(view[:count])
    return checksum.hexdigest()


def file_problem(checkpoint_dir: Path, relative: str, info: object, algorithm: str) -> str | None:
    """Why one listed file does not match its manifest record, or None when it does."""
    path = safe_relative_path(checkpoint_dir, relative)
    if path is None:
        return f"{relative}: path leaves the checkpoint directory"
    if not isinstance(info, dict) or not isinstance(info.get("bytes"), int):
        return f"{relative}: malformed manifest record"
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return f"{relative}: missing"
    if size != info["bytes"]:
        return f"{relative}: {size} bytes on disk, manifest says {info['bytes']}"
    if file_checksum(path, algorithm) != info.get("checksum"):
        return f"{relative}: checksum mismatch"
    return None


def verify(checkpoint_dir: Path) -> str | None:
    """None when the format is readable and every file's size and checksum match; otherwise the reason."""
    manifest = read_manifest(checkpoint_dir)
    if manifest is None:
        return f"{MANIFEST_FILE}: missing or unreadable"
    problem = format_problem(manifest)
    if problem is not None:
        return problem
    algorithm = manifest.get("checksum_algorithm")
    if algorithm not in SUPPORTED_CHECKSUMS:
        return f"unsupported checksum algorithm {algorithm!r}"
    files = manifest.get("files")
    if not isinstance(files, dict) or STATE_FILE not in files:
        return f"{MANIFEST_FILE}: lists no {STATE_FILE}"
    for relative, info in sorted(files.items()):
        problem = file_problem(Path(checkpoint_dir), relative, info, algorithm)
        if problem is not None:
            return problem
    return None


def latest_verified(run_dir: Path) -> CheckpointEntry | None:
    """The newest checkpoint to resume from that verifies, falling back past corrupt or unreadable ones."""
    for entry in reversed(list_checkpoints(run_dir)):
        if entry.reason != BEST and verify(entry.path) is None:
            return entry
    return None


def best_entries(entries: list[CheckpointEntry]) -> list[CheckpointEntry]:
    """Best checkpoints, the best first: highest evaluation mean, then the newest step.

    Within one trajectory each best beats every earlier one, so the first is also the newest; after a
    resume from an older checkpoint, a best written by the discarded future may still rank first.
    """
    bests = [entry for entry in entries if entry.reason == BEST and entry.evaluation_mean is not None]
    return sorted(bests, key=lambda entry: (entry.evaluation_mean, entry.step, entry.time), reverse=True)


def resolve(run_dir: Path, which: str) -> CheckpointEntry:
    """The checkpoint named by "latest", "best", a step number, or a path to a checkpoint directory."""
    which = str(which).strip()
    if which == "latest":
        return _resolve_latest(run_dir)
    if which == BEST:
        return _resolve_best(run_dir)
    if which.isdigit():
        return _resolve_step(run_dir, int(which))
    return _resolve_path(run_dir, which)


def _resolve_latest(run_dir: Path) -> CheckpointEntry:
    entry = latest_verified(run_dir)
    if entry is not None:
        return entry
    entries = list_checkpoints(run_dir)
    if not entries:
        raise CheckpointNotFound(f"{run_dir} has no checkpoints")
    reasons = "; ".join(f"step {entry.step}: {verify(entry.path)}" for entry in entries)
    raise CheckpointNotFound(f"no checkpoint of {run_dir} verifies ({reasons})")


def _resolve_best(run_dir: Path) -> CheckpointEntry:
    bests = best_entries(list_checkpoints(run_dir))
    for entry in bests:
        if verify(entry.path) is None:
            return entry
    if bests:
        reasons = "; ".join(f"step {entry.step}: {verify(entry.path)}" for entry in bests)
        raise CheckpointNotFound(f"no best checkpoint of {run_dir} verifies ({reasons})")
    raise CheckpointNotFound(f"{run_dir} has no best checkpoint yet: one is written when an evaluation beats "
                             "every earlier one ([eval] every_steps > 0)")


def _resolve_step(run_dir: Path, step: int) -> CheckpointEntry:
    entries = list_checkpoints(run_dir)
    # At a step that has both, the resumable checkpoint answers; a best one holds the same networks.
    for entry in sorted(entries, key=lambda entry: entry.reason == BEST):
        if entry.step == step:
            return entry
    available = ", ".join(str(entry.step) for entry in entries) or "none"
    raise CheckpointNotFound(f"{run_dir} has no checkpoint at step {step} (steps available: {available})")


def _resolve_path(run_dir: Path, which: str) -> CheckpointEntry:
    # A bare directory name such as step-000000012345 is looked up in the run's checkpoints first.
    for candidate in (checkpoints_dir(run_dir) / which, Path(which).expanduser()):
        if candidate.is_dir():
            entry = entry_of(candidate)
            if entry is None:
                raise CheckpointNotFound(f"{candidate} is not a checkpoint (no valid {MANIFEST_FILE})")
            return entry
    raise CheckpointNotFound(f"no checkpoint {which!r}: expected 'latest', 'best', a step number or a checkpoint "
                             "directory")
