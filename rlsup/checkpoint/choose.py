"""Which checkpoint: the newest that verifies, the best, or the one a user names (latest, best, a step, a path)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rlsup.checkpoint.manifest import (BEST, BEST_SUFFIX, MANIFEST_FILE, CheckpointEntry, CheckpointProblem, Refused,
                                       checkpoints_dir, entry_of, list_checkpoints, scan_checkpoints, verify)

# A worker with keep = 1 and a short interval rotates checkpoints away while they are read (verified, loaded,
# linked by a fork): the newest is listed again this many times before a reader gives up, in one sentence.
ROTATED_TRIES = 20


class CheckpointNotFound(CheckpointProblem):
    """No checkpoint matches what the user asked for."""


class NoUsableCheckpoint(CheckpointProblem):
    """A run has checkpoints and none of them verifies: starting over would silently lose the run."""


@dataclass(frozen=True)
class Choice:
    """The checkpoint a resume starts from, and every checkpoint newer than it that was refused, newest first."""

    entry: CheckpointEntry | None
    refused: tuple[Refused, ...]

    def skipped_message(self) -> str | None:
        """One sentence naming the newer checkpoints passed over and why, or None when none was."""
        if not self.refused or self.entry is None:
            return None
        return (f"skipped {len(self.refused)} newer checkpoint(s) that do not verify: "
                + "; ".join(map(str, self.refused)) + f"; using {self.entry.path.name}")


def newest_usable(run_dir: Path, *, strict: bool = False) -> Choice:
    """The newest checkpoint that verifies, with the newer ones it falls back past and why each failed."""
    for _ in range(ROTATED_TRIES):
        entries, invalid = scan_checkpoints(run_dir, strict=strict)
        # Listed, then gone before its manifest was read: rotated away mid-scan (keep = 1 writes the next one
        # meanwhile), which left a scan of nothing and "has no checkpoints" 1 time in 60 at keep = 1.
        vanished = any(not item.path.is_dir() for item in invalid)
        # A best checkpoint holds no replay: never a resume point, and a broken one blocks nothing.
        entries = [entry for entry in entries if entry.reason != BEST]
        invalid = [item for item in invalid if not item.path.name.endswith(BEST_SUFFIX) and item.path.is_dir()]
        chosen, refused, rotated = _first_verified(reversed(entries))
        if chosen is not None or not (rotated or vanished):
            break
    # A directory with no usable manifest counts as newer unless its name says it is older.
    refused += [item for item in invalid if chosen is None or item.step is None or item.step > chosen.step]
    refused.sort(key=lambda item: -1 if item.step is None else item.step, reverse=True)
    return Choice(chosen, tuple(refused))


def _first_verified(entries) -> tuple[CheckpointEntry | None, list[Refused], bool]:
    """The first of entries that verifies, those refused before it, and whether any was rotated away meanwhile
    (its directory gone: not damage, so not refused; the caller lists the checkpoints again)."""
    refused, rotated = [], False
    for entry in entries:
        problem = verify(entry.path)
        if problem is None:
            return entry, refused, rotated
        if not entry.path.is_dir():
            rotated = True
        else:
            refused.append(Refused(entry.path, problem))
    return None, refused, rotated


def latest_verified(run_dir: Path) -> CheckpointEntry | None:
    """The newest checkpoint to resume from that verifies, falling back past corrupt or unreadable ones."""
    return newest_usable(run_dir).entry


def require_usable(run_dir: Path) -> Choice:
    """newest_usable, refusing (NoUsableCheckpoint) a run that has checkpoints of which none verifies."""
    choice = newest_usable(run_dir, strict=True)
    if choice.entry is None and choice.refused:
        listed = "; ".join(map(str, choice.refused))
        raise NoUsableCheckpoint(f"{run_dir} has {len(choice.refused)} checkpoint(s) and none can be used: "
                                 f"{listed}")
    return choice


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
    return latest_choice(run_dir).entry


def latest_choice(run_dir: Path) -> Choice:
    """What "latest" names, with the newer checkpoints it falls back past; raises when there is none."""
    choice = require_usable(run_dir)
    if choice.entry is None:
        raise CheckpointNotFound(f"{run_dir} has no checkpoints")
    return choice


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
    # A bare directory name such as step-000000012345 is looked up in the run's checkpoints first. A path the
    # user typed may be a link of theirs: resolved, as verify() follows none.
    inside = [checkpoints_dir(run_dir) / which] if os.sep not in which else []
    for candidate in (*inside, Path(which).expanduser().resolve()):
        if candidate.is_dir():
            entry = entry_of(candidate)
            if entry is None:
                raise CheckpointNotFound(f"{candidate} is not a checkpoint (no valid {MANIFEST_FILE})")
            return entry
    raise CheckpointNotFound(f"no checkpoint {which!r}: expected 'latest', 'best', a step number or a checkpoint "
                             "directory")
