"""Moving a job's run directory under its cluster's run_root, so that a job made locally resumes on the cluster.

The old run stays untouched until the store names the new one, so a daemon SIGKILLed at any point
finds, on restart, either the store naming the old run, intact (the move starts again and first removes
what the killed one left under run_root), or the store naming the new, verified run and, as moved_from,
the old one (what is left of it is removed at the job's next start). Only the directory the store
recorded is deleted, and only while it still holds a run: the note moved-from.json lies under run_root,
which the cluster's nodes also write, so it says where a copy came from and never what to delete.

1. copy the run to run_root/.moving-NAME, fsync every file and directory        (a thread)
2. verify there the newest checkpoint's checksums                               (a thread)
3. write moved-from.json into it, rename it to run_root/NAME, fsync run_root     (a thread)
4. point the job's run_dir at it (and jobs following its --copy source.toml) and record the old one as
   moved_from, with an event                                                     (the daemon's thread)
5. rename the old run to .moved-NAME beside it, then delete it, with an event     (a thread)

The run's worker.lock is held from 1 to 3, so no `rlsup run --resume` starts training the old run meanwhile.
Moving back (cluster to local) needs nothing: the local box sees run_root at the same path.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rlsup import atomic, locks, own_files, paths
from rlsup.checkpoint import manifest as manifests
from rlsup.daemon.clusters import Cluster
from rlsup.jobs.state import Desired, State
from rlsup.jobs.record import EventKind
from rlsup.jobs.store import Job, Store

log = logging.getLogger("rlsup.daemon")

MOVING_PREFIX = ".moving-"  # the copy being made under run_root
MOVED_PREFIX = ".moved-"    # the old run, hidden once the store names the new one, being deleted
NOTE_FILE = "moved-from.json"


class MoveFailed(OSError):
    """The run could not be copied or its copy does not verify; the old run is intact."""


@dataclass(frozen=True)
class Moved:
    """A move that finished (new is set) or failed (error is set); the store has not been told yet."""

    job_id: int
    old: Path
    new: Path | None = None
    error: str = ""
    seconds: float = 0.0
    size: int = 0


def cluster_root(clusters: tuple[Cluster, ...], name: str) -> Path | None:
    """The run_root of the named cluster, or None when daemon.toml does not name it (the start says why)."""
    return next((Path(cluster.run_root) for cluster in clusters if cluster.name == name), None)


def is_under(run_dir: Path, root: Path) -> bool:
    return Path(run_dir).resolve().is_relative_to(Path(root).resolve())


def move_run(old: Path, root: Path) -> Path:
    """Steps 1-3: a verified copy of the run at root/NAME, the old one untouched; raises MoveFailed."""
    old, root = Path(old), Path(root)
    destination = root / old.name
    temporary = root / f"{MOVING_PREFIX}{old.name}"
    paths.ensure_private_dir(root)
    try:
        descriptor = locks.acquire(old / paths.WORKER_LOCK)
    except locks.LockHeld as error:
        raise MoveFailed(f"a worker (pid {error.pid}) trains {old}; pause it first") from None
    try:
        _remove_own_leftover(destination, old)
        shutil.rmtree(temporary, ignore_errors=True)  # a killed move's copy: the old run is intact
        shutil.copytree(old, temporary, symlinks=True)
        _fsync_tree(temporary)
        _verify_copy(old, temporary)
        atomic.write_json(temporary / NOTE_FILE, {"from": str(old), "time": time.time()})
        os.rename(temporary, destination)
        atomic.fsync_directory(root)
    except OSError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise MoveFailed(f"cannot copy {old} to {destination}: {error}") from None
    finally:
        os.close(descriptor)
    return destination


def _remove_own_leftover(destination: Path, old: Path) -> None:
    """A destination a killed move renamed into place before the store named it: made again from the old run."""
    if not destination.exists():
        return
    note = own_files.read_json(destination / NOTE_FILE) or {}
    if note.get("from") != str(old):
        raise MoveFailed(f"{destination} already exists and is not a copy of {old}")
    shutil.rmtree(destination)


def _fsync_tree(top: Path) -> None:
    """Every file and directory of the copy on disk before it is renamed into place."""
    for directory, _, files in os.walk(top):
        for name in files:
            path = Path(directory) / name
            if not path.is_symlink():
                atomic.fsync_file(path)
        atomic.fsync_directory(Path(directory))


def _verify_copy(old: Path, copy: Path) -> None:
    """The newest checkpoint to resume from reads back with its checksums; one broken in the original too
    is not the copy's fault, and the worker passes over it there as it would have here."""
    entries = [entry for entry in manifests.list_checkpoints(copy) if entry.reason != manifests.BEST]
    if not entries:
        return
    newest = entries[-1].path
    problem = manifests.verify(newest)
    if problem is not None and manifests.verify(old / newest.relative_to(copy)) is None:
        raise MoveFailed(f"the copy of {newest.name} does not verify: {problem}")


def run_size(run_dir: Path) -> int:
    """The bytes of a run's files, a link counted as the link: one that dangles failed every move after the copy
    was in place. Links are copied as links (copytree symlinks=True), never followed: rlsup never writes or
    reads through a link in a run (own_files.py), so one copied along is inert, and refusing the move would
    strand a run that resumes fine where it is."""
    return sum(os.lstat(Path(directory) / name).st_size for directory, _, files in os.walk(run_dir) for name in files)


def relocated(path: Path, old: Path, new: Path) -> Path:
    """path inside the old run (a --copy job's source.toml) as it is in the new one; any other path unchanged."""
    path = Path(path)
    return new / path.relative_to(old) if path.is_relative_to(old) else path


def hide_old(old: Path) -> Path:
    """Step 5's first half: one rename hides the old run, so no `rlsup run --resume` trains a stale copy."""
    old = Path(old)
    hidden = old.parent / f"{MOVED_PREFIX}{old.name}"
    if old.exists():
        os.rename(old, hidden)
        atomic.fsync_directory(old.parent)
    return hidden


def doomed_directory(old: Path, new: Path) -> tuple[Path | None, str]:
    """What of a job's recorded old run may be deleted (the run, or what a killed deletion left of it as
    .moved-NAME), or None and why nothing may: never a link, never the new run or a directory holding it."""
    hidden = old.parent / f"{MOVED_PREFIX}{old.name}"
    target = old if os.path.lexists(old) else hidden if os.path.lexists(hidden) else None
    if target is None:
        return None, "already gone"
    if target.is_symlink() or not target.is_dir():
        return None, f"{target} is {'a symbolic link' if target.is_symlink() else 'not a directory'}"
    if new.resolve().is_relative_to(target.resolve()):
        return None, f"{target} holds the job's run {new}"
    if target == old and not (old / paths.JOB_FILE).is_file():
        return None, f"{old} holds no {paths.JOB_FILE}: not a run"
    return target, ""


def ready_to_start(mover: "RunMover", store: Store, job: Job, clusters: tuple[Cluster, ...]) -> bool:
    """Whether a cluster job's run is where the cluster's nodes see it; if not, its move begins and it waits."""
    root = cluster_root(clusters, job.cluster)
    if root is None:
        return True  # an unknown cluster: the runner's start says so
    if is_under(Path(job.run_dir), root):
        mover.discard(store, job.id)
        return True
    if mover.begin(job.id, Path(job.run_dir), root):
        message = f"moving run {job.run_dir} under cluster {job.cluster}'s run_root {root}"
        store.update(job.id, reason=message)
        store.add_event(job.id, EventKind.MOVING, message)
    return False


def record(mover: "RunMover", store: Store, moved: Moved) -> None:
    """Step 4 on the daemon's thread: the store names the new run (then step 5), or the job pauses with why."""
    job = store.job(moved.job_id)
    if job is None or Path(job.run_dir) != moved.old:
        return
    if moved.new is None:
        reason = (f"cannot move the run to cluster {job.cluster}: {moved.error}; it stays intact at {moved.old}; "
                  "resume to try again")
        if job.state is State.QUEUED:
            store.transition(job.id, State.PAUSED, reason, desired=Desired.PAUSED)
        else:
            store.add_event(job.id, EventKind.MOVING, reason)
        return
    store.relocate(job.id, moved.new, (Path(job.spec_path), relocated(Path(job.spec_path), moved.old, moved.new)),
                   f"moved run from {moved.old} to {moved.new} for cluster {job.cluster} "
                   f"({moved.size / 1e6:.1f} MB in {moved.seconds:.1f} s)")
    mover.discard(store, job.id)


class RunMover:
    """Moves in threads, one per job, so that copying a large replay never stalls the daemon's loop.

    The daemon's thread alone writes the store: it collects finished moves with finished().
    """

    def __init__(self, wake: threading.Event):
        self.wake = wake
        self.lock = threading.Lock()
        self.moving: set[int] = set()
        self.results: list[Moved] = []
        self.discarding: set[int] = set()  # jobs whose old run is being deleted
        self.discarded: list[tuple[int, EventKind, str]] = []  # (job, event kind, message) for the daemon's thread

    def begin(self, job_id: int, old: Path, root: Path) -> bool:
        """Start moving the job's run under root; False when a move of it is already under way."""
        with self.lock:
            if job_id in self.moving:
                return False
            self.moving.add(job_id)
        threading.Thread(target=self._move, args=(job_id, Path(old), Path(root)), daemon=True,
                         name=f"move-{job_id}").start()
        return True

    def _move(self, job_id: int, old: Path, root: Path) -> None:
        began = time.monotonic()
        try:
            new = move_run(old, root)
            result = Moved(job_id, old, new, seconds=time.monotonic() - began, size=run_size(new))
        except Exception as error:  # whatever it is, the old run is intact and the job must hear of it
            log.exception("job %s: moving %s failed", job_id, old)
            result = Moved(job_id, old, error=str(error))
        with self.lock:
            self.results.append(result)
        self.wake.set()

    def finished(self) -> list[Moved]:
        """Moves that ended since the last call; they are no longer under way."""
        with self.lock:
            results, self.results = self.results, []
            self.moving.difference_update(result.job_id for result in results)
        return results

    def discard(self, store: Store, job_id: int) -> None:
        """Step 5, and what a killed daemon left of it: the old run the store recorded hidden now, deleted in a
        thread; the store forgets it, with an event, once it is gone (finish_discards) or found not to be a run.

        Called at every start of a cluster job; a job with no old run recorded costs nothing more.
        """
        job = store.job(job_id)  # fresh: the caller's copy may predate the last deletion
        with self.lock:
            if job is None or not job.moved_from or job_id in self.discarding:
                return
            self.discarding.add(job_id)
        old, new = Path(job.moved_from), Path(job.run_dir)
        target, why_not = doomed_directory(old, new)
        try:
            hidden = hide_old(old) if target == old else target
        except OSError as error:
            hidden, why_not = None, f"cannot hide it: {error}"
        if hidden is None:  # a leftover to delete by hand, never a reason to stop the job
            self._discarded(job_id, EventKind.KEPT, f"old run {old} not deleted after the move to {new}: {why_not}")
            return
        threading.Thread(target=self._delete, args=(job_id, old, new, hidden), daemon=True,
                         name="discard-moved").start()

    def _delete(self, job_id: int, old: Path, new: Path, hidden: Path) -> None:
        shutil.rmtree(hidden, ignore_errors=True)
        (new / NOTE_FILE).unlink(missing_ok=True)
        if os.path.lexists(hidden):
            self._discarded(job_id, EventKind.KEPT, f"old run {old} only partly deleted after the move to {new}: "
                                            f"what is left is {hidden}")
        else:
            self._discarded(job_id, EventKind.DELETED, f"deleted old run {old}: the job's run moved to {new}")

    def _discarded(self, job_id: int, kind: EventKind, message: str) -> None:
        with self.lock:
            self.discarded.append((job_id, kind, message))
            self.discarding.discard(job_id)
        self.wake.set()

    def take_discards(self) -> list[tuple[int, EventKind, str]]:
        """Old runs dealt with since the last call, (job, event kind, message), for the daemon's thread to record
        (Store.forget_moved_from)."""
        with self.lock:
            done, self.discarded = self.discarded, []
        return done
