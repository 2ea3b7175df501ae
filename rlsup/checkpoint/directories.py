"""Installing, rotating and cleaning checkpoint directories: each step one rename, so a crash leaves the
old checkpoint or the new one, never neither."""
from __future__ import annotations

import os
import re
import secrets
import shutil
from pathlib import Path

from rlsup import own_files, paths
from rlsup.atomic import fsync_directory
from rlsup.checkpoint import choose, manifest as manifests
from rlsup.checkpoint.manifest import CheckpointEntry

# Directories beside the checkpoints; the leading dot hides them from list_checkpoints.
TEMPORARY_PREFIX = ".tmp-"
ASIDE_PREFIX = ".old-"
DELETING_PREFIX = ".deleting-"
_LEFTOVER = re.compile(r"^\.(tmp|old|deleting)-(.+)-(\d+)-([0-9a-f]+)$")


def temporary_beside(final: Path) -> Path:
    """Where a checkpoint is written before its rename into `final`; named so a cleanup knows its writer."""
    return final.parent / f"{TEMPORARY_PREFIX}{final.name}-{os.getpid()}-{secrets.token_hex(4)}"


def checkpoints_parent(run_dir: Path) -> Path:
    parent = manifests.checkpoints_dir(run_dir)
    if not parent.is_dir() or parent.is_symlink():
        paths.ensure_private_dir(parent.parent)
        own_files.own_directory(parent)  # a link is refused: checkpoints are written, and rotated, in the run only
        fsync_directory(Path(run_dir))
    return parent


def install(temporary: Path, final: Path) -> None:
    """Rename a finished checkpoint into place; an old one at the same step is moved aside first and
    deleted only once the new one is in, so a crash leaves one of them (restored by the next cleanup)."""
    parent = final.parent
    aside = None
    if final.exists():
        aside = parent / f"{ASIDE_PREFIX}{final.name}-{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(final, aside)
    os.rename(temporary, final)
    fsync_directory(parent)
    if aside is not None:
        remove_tree(aside)


def rotate(run_dir: Path, keep: int) -> list[Path]:
    """Delete all but the newest keep checkpoints, never the newest one that verifies, and all best
    checkpoints but the last written and the highest-scoring; returns the deleted."""
    return rotate_after_write(run_dir, keep, written=None)


def rotate_after_write(run_dir: Path, keep: int, written: Path | None) -> list[Path]:
    """rotate, knowing that `written` was checksummed as it was written and needs no second read."""
    parent = manifests.checkpoints_dir(run_dir)
    if not parent.is_dir():
        return []
    clean_leftovers(parent)
    entries = manifests.list_checkpoints(run_dir)
    resumable = [entry for entry in entries if entry.reason != manifests.BEST]
    doomed = resumable[:max(len(resumable) - keep, 0)]
    # Verifying reads every byte (a whole replay): only worth it when something may be deleted.
    protected = {_newest_verified(resumable, written)} if doomed else set()
    bests = choose.best_entries(entries)
    if bests:
        newest_best = max(bests, key=lambda entry: entry.time)  # written last: the current trajectory's
        protected.update({bests[0].path, newest_best.path})
        doomed += bests
    deleted = []
    for entry in doomed:
        if entry.path not in protected:
            _delete_directory(entry.path)
            deleted.append(entry.path)
    return deleted


def _newest_verified(entries: list[CheckpointEntry], known_verified: Path | None) -> Path | None:
    # The checkpoint just written was checksummed as it was written: no need to read it back.
    for entry in reversed(entries):
        if entry.path == known_verified or manifests.verify(entry.path) is None:
            return entry.path
    return None


def _delete_directory(path: Path) -> None:
    """Hide the directory with one atomic rename, then remove it; a crash halfway leaves only a dot directory."""
    hidden = path.parent / f"{DELETING_PREFIX}{path.name}-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(path, hidden)
    # Already invisible: a failure here is a leftover for the next cleanup, not a reason to stop training.
    remove_tree(hidden)


def remove_tree(path: Path) -> None:
    """rmtree, giving the owner back the right to list and empty a directory made unreadable (a checkpoint
    chmod 000): rmtree alone failed on it at every rotation and cleanup, leaving it for ever. Never follows a
    link, and never raises: what is left is a leftover for the next cleanup."""
    if os.path.islink(path):  # a checkpoint a received run holds as a link: the link goes, never its target
        os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    try:
        os.chmod(path, 0o700)
        for directory, subdirectories, _ in os.walk(path):
            for name in subdirectories:
                child = os.path.join(directory, name)
                if not os.path.islink(child):  # chmod follows links
                    os.chmod(child, 0o700)
    except OSError:
        pass
    shutil.rmtree(path, ignore_errors=True)


def clean_leftovers(parent: Path) -> None:
    """Remove what crashed writers left (temporary and half-deleted directories) and restore a checkpoint
    that was moved aside for a same-step rewrite that never finished."""
    for child in sorted(parent.iterdir()):
        match = _LEFTOVER.match(child.name)
        if match is None or not child.is_dir():
            continue
        kind, name, pid = match.group(1), match.group(2), int(match.group(3))
        if pid != os.getpid() and _process_alive(pid):
            continue  # another writer is still at work
        original = parent / name
        if kind == "old" and not original.exists() and manifests.entry_of(child) is not None:
            os.rename(child, original)
            fsync_directory(parent)
        else:
            remove_tree(child)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
