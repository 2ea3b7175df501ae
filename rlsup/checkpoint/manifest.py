"""A checkpoint's manifest: its format, seal and verification, and the listing of a run's checkpoints (no torch)."""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from rlsup import paths
from rlsup.formatting import INT64_MAX, finite
from rlsup.checkpoint.trajectory import Trajectory
from rlsup.checkpoint.checksums import SUPPORTED_CHECKSUMS, file_checksum, safe_relative_path
from rlsup.own_files import NotOwnFile, open_beneath, read_json

FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
STATE_FILE = "state.json"
REASONS = ("interval", "pause", "final", "preempt", "best")
# A best checkpoint holds the networks of the best evaluation so far, without the replay: it is for
# playing and exporting, so resuming and "latest" never pick it.
BEST = "best"
BEST_SUFFIX = "-best"  # of a best checkpoint's directory name (paths.checkpoint_name)


# sha256 of the manifest's own canonical content, stored in it: a flipped digit of metrics_bytes or a
# renamed key would otherwise be trusted. Format 1 was never released without it, so a manifest that
# lacks it is refused like any other damaged one (no old manifests to stay compatible with).
MANIFEST_CHECKSUM = "manifest_checksum"
# What every format-1 manifest holds, and the type each value must have.
MANIFEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": int, "rlsup_version": str, "step": int, "episodes": int, "time": (int, float), "reason": str,
    "spec_sha256": str, "fingerprint": str, "metrics_bytes": int, "extra": dict, "checksum_algorithm": str,
    "files": dict, MANIFEST_CHECKSUM: str}
COUNT_FIELDS = ("step", "episodes", "metrics_bytes")
_STEP_NAME = re.compile(r"^step-(\d+)")


class CheckpointProblem(ValueError):
    """A checkpoint, or a run's checkpoints, that cannot be used; one line for the user (exit 2)."""


class CheckpointsUnreadable(CheckpointProblem):
    """The run's checkpoints directory exists but cannot be listed."""


class CheckpointError(CheckpointProblem):
    """A checkpoint that cannot be written or is refused on load (failed checksum, newer format, missing file)."""


class NoSpace(CheckpointProblem):
    """A checkpoint does not fit on its filesystem; the previous checkpoints are untouched."""


def manifest_checksum(manifest: dict) -> str:
    """sha256 of the manifest's canonical JSON (sorted keys, no spaces) without its checksum field."""
    content = {key: value for key, value in manifest.items() if key != MANIFEST_CHECKSUM}
    return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sealed(manifest: dict) -> dict:
    """The manifest with its checksum added: what the writer stores."""
    return {**manifest, MANIFEST_CHECKSUM: manifest_checksum(manifest)}


def manifest_problem(manifest: dict) -> str | None:
    """Why a parsed manifest cannot be trusted (format, own checksum, schema), or None when it can."""
    problem = format_problem(manifest)
    if problem is not None:
        return problem
    if MANIFEST_CHECKSUM not in manifest:
        return f"{MANIFEST_FILE}: no {MANIFEST_CHECKSUM}"
    if manifest[MANIFEST_CHECKSUM] != manifest_checksum(manifest):
        return f"{MANIFEST_FILE}: checksum mismatch (changed after it was written)"
    return schema_problem(manifest)


def schema_problem(manifest: dict) -> str | None:
    """Why a manifest lacks a field rlsup reads or holds one of the wrong type, or None."""
    for key, kind in MANIFEST_FIELDS.items():
        if key not in manifest:
            return f"{MANIFEST_FILE}: no {key!r}"
        value = manifest[key]
        if isinstance(value, bool) or not isinstance(value, kind):
            return f"{MANIFEST_FILE}: {key!r} has the wrong type ({type(value).__name__})"
    for key in COUNT_FIELDS:
        if manifest[key] < 0:
            return f"{MANIFEST_FILE}: {key!r} is negative"
        if manifest[key] > INT64_MAX:
            return f"{MANIFEST_FILE}: {key!r} is wider than 64 bits"
    if not finite(manifest["time"]):  # an integer of hundreds of digits, which float() refuses
        return f"{MANIFEST_FILE}: 'time' is too large"
    if manifest["checksum_algorithm"] not in SUPPORTED_CHECKSUMS:
        return f"unsupported checksum algorithm {manifest['checksum_algorithm']!r}"
    if STATE_FILE not in manifest["files"]:
        return f"{MANIFEST_FILE}: lists no {STATE_FILE}"
    for relative, info in manifest["files"].items():
        if not (isinstance(info, dict) and type(info.get("bytes")) is int and 0 <= info["bytes"] <= INT64_MAX
                and isinstance(info.get("checksum"), str)):
            return f"{MANIFEST_FILE}: malformed record of {relative}"
    return None


ENV_RESTART_MARK = "(envs restarted)"  # beside the reason: see CheckpointEntry.env_restarts


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
        return Trajectory.of_manifest(self.manifest).evaluation_mean

    @property
    def env_restarts(self) -> list[str]:
        """Envs that a resume before this checkpoint restarted, their saved episodes not replaying exactly."""
        return Trajectory.of_manifest(self.manifest).env_restarts

    @property
    def label(self) -> str:
        """The reason as listings show it: a best checkpoint with its evaluation; a mark after env restarts."""
        mean = self.evaluation_mean
        label = f"best (eval {mean:g})" if self.reason == BEST and mean is not None else self.reason
        return f"{label} {ENV_RESTART_MARK}" if self.env_restarts else label

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
    """The entry of a directory, or None when its manifest is missing or lacks what a listing shows.

    A manifest that only fails its own checksum is still listed (verify() refuses it), so a listing
    shows the damage instead of hiding the directory.
    """
    manifest = read_manifest(checkpoint_dir)
    if manifest is None or format_problem(manifest) is not None or schema_problem(manifest) is not None:
        return None
    return CheckpointEntry.from_manifest(checkpoint_dir, manifest)


@dataclass(frozen=True)
class Refused:
    """A checkpoint directory that cannot be used, and why."""

    path: Path
    problem: str

    @property
    def step(self) -> int | None:
        """The step its directory name says (its manifest may not say anything)."""
        match = _STEP_NAME.match(self.path.name)
        return int(match.group(1)) if match else None

    def __str__(self) -> str:
        return f"{self.path.name} ({self.problem})"


def checkpoint_directories(run_dir: Path, *, strict: bool = False) -> list[Path]:
    """Every directory in the run's checkpoints/ but the temporary (dot) ones, [] when there is none.

    strict: a checkpoints/ that exists but cannot be listed raises CheckpointsUnreadable instead of
    looking empty, which would make a resume start over.
    """
    parent = checkpoints_dir(run_dir)
    if parent.is_symlink():  # listed, it would be verified, loaded and rotated (deleted) outside the run
        if strict:
            raise CheckpointsUnreadable(f"{parent} is a symbolic link: rlsup reads checkpoints inside the run only")
        return []
    try:
        children = list(os.scandir(parent))
    except FileNotFoundError:
        return []
    except OSError as error:
        if strict:
            raise CheckpointsUnreadable(f"cannot read {parent}: {error.strerror or error}") from None
        return []
    return [Path(child.path) for child in children
            if not child.name.startswith(".") and child.is_dir(follow_symlinks=False)]


def scan_checkpoints(run_dir: Path, *, strict: bool = False) -> tuple[list[CheckpointEntry], list[Refused]]:
    """The listable checkpoints in ascending step, and the directories whose manifest is missing or broken."""
    entries, invalid = [], []
    for directory in checkpoint_directories(run_dir, strict=strict):
        entry = entry_of(directory)
        if entry is not None:
            entries.append(entry)
        else:
            invalid.append(Refused(directory, verify(directory) or f"{MANIFEST_FILE}: unusable"))
    entries.sort(key=lambda entry: (entry.step, entry.time))
    invalid.sort(key=lambda refused: refused.path.name)
    return entries, invalid


def list_checkpoints(run_dir: Path) -> list[CheckpointEntry]:
    """Every checkpoint of a run in ascending step; temporary (dot) directories and directories without a
    valid manifest are skipped."""
    return scan_checkpoints(run_dir)[0]


def format_problem(manifest: dict) -> str | None:
    """Why this rlsup cannot read a manifest's format, or None when it can."""
    version = manifest.get("format")
    if not isinstance(version, int) or isinstance(version, bool):
        return f"unreadable format {version!r}"
    if version > FORMAT_VERSION:
        return f"format {version} is newer than this rlsup ({FORMAT_VERSION}): upgrade rlsup"
    if version < 1:
        return f"unknown format {version}"
    return None


def file_problem(checkpoint_dir: Path, relative: str, info: object, algorithm: str) -> str | None:
    """Why one listed file does not match its manifest record, or None when it does."""
    path = safe_relative_path(checkpoint_dir, relative)
    if path is None:
        return f"{relative}: path leaves the checkpoint directory"
    if not isinstance(info, dict) or not isinstance(info.get("bytes"), int):
        return f"{relative}: malformed manifest record"
    try:  # only a regular file inside the checkpoint: a link or a FIFO could be read for ever
        handle = os.fdopen(open_beneath(Path(checkpoint_dir), path.relative_to(checkpoint_dir).parts), "rb",
                           buffering=0)
    except FileNotFoundError:
        return f"{relative}: missing"
    except NotOwnFile:
        return f"{relative}: not a regular file inside the checkpoint (a link, a FIFO or a device)"
    except OSError as error:
        return f"{relative}: cannot be read ({error.strerror or error})"
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size != info["bytes"]:
            return f"{relative}: {size} bytes on disk, manifest says {info['bytes']}"
        checksum = file_checksum(handle, size, algorithm)
    if checksum is None:
        return f"{relative}: longer than the manifest says (it grew while read)"
    if checksum != info.get("checksum"):
        return f"checksum mismatch in {relative}"
    return None


def verify(checkpoint_dir: Path) -> str | None:
    """None when the format is readable and every file's size and checksum match; otherwise the reason."""
    manifest = read_manifest(checkpoint_dir)
    if manifest is None:
        return f"{MANIFEST_FILE}: missing or unreadable"
    problem = manifest_problem(manifest)
    if problem is not None:
        return problem
    for relative, info in sorted(manifest["files"].items()):
        problem = file_problem(Path(checkpoint_dir), relative, info, manifest["checksum_algorithm"])
        if problem is not None:
            return problem
    return None
