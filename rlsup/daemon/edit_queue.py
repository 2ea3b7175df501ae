"""Saved job files judged once each, and their jobs' edits carried out a bounded slice per turn of the loop."""
from __future__ import annotations

import collections
import logging
import time
from pathlib import Path
from typing import Iterable, Iterator

from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.daemon import edits
from rlsup.jobs.state import EditAction, State
from rlsup.jobs.record import EventKind, jobs_following, spec_columns
from rlsup.jobs.store import Job

log = logging.getLogger("rlsup.daemon")

# Time the loop spends on queued edits before it turns again (intents, exits, status). Each job's share of
# an edit (its job.toml read and rewritten, its row and events) took ~29 ms, so an edit reaching 1,000 jobs
# held the loop 25-29 s and a pause of another job waited 24.5 s. In slices, measured on 2 loaded cores:
# the pause was served 0.13-0.28 s after `rlsup pause` returned, and the 1,000 jobs had the edit in 41 s.
SLICE_S = 0.05


class EditQueue:
    """Per job file, the newest parsed save and the jobs still to be judged against it (in order)."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[edits.ParsedFile, collections.deque[int]]] = {}

    def __bool__(self) -> bool:
        return bool(self.files)

    def queued(self, path: str, digest: str) -> set[int]:
        """Jobs already waiting for this very save of path."""
        parsed, jobs = self.files.get(path, (None, ()))
        return set(jobs) if parsed is not None and parsed.saved.digest == digest else set()

    def add(self, parsed: edits.ParsedFile, job_ids: Iterable[int]) -> None:
        """Queue jobs for a save; a newer save of the file takes over the jobs the older one had left."""
        path = str(parsed.saved.path)
        _, left = self.files.get(path, (None, collections.deque()))
        jobs = collections.deque(dict.fromkeys([*left, *job_ids]))
        self.files[path] = (parsed, jobs)

    def take(self) -> Iterator[tuple[edits.ParsedFile, int]]:
        """Each queued (save, job) once, oldest file first; what the caller stops short of stays queued."""
        while self.files:
            path = next(iter(self.files))
            parsed, jobs = self.files[path]
            job_id = jobs.popleft()
            if not jobs:
                del self.files[path]
            yield parsed, job_id


class EditHandling:
    """The daemon's part that follows edits of job files (DESIGN.md section 5); mixed into Daemon."""

    def queue_file(self, path: str, jobs: list[Job] | None = None) -> None:
        """Read and judge a saved file once, for every job it drives that has not judged this save."""
        saved = edits.read_saved(Path(path))
        if saved is None:
            return
        following = jobs_following(path, self.store.jobs()) if jobs is None else jobs
        waiting = self.edit_queue.queued(str(saved.path), saved.digest)
        new = [job.id for job in following if job.spec_seen != saved.digest and job.id not in waiting]
        if not new:
            return  # saved without a change, already judged, or already queued (a second event of one save)
        log.info("edit of %s judged once for %d job(s)", path, len(new))
        try:
            parsed = edits.parse(saved)
        except Exception:  # a file that breaks the parser must not stop the daemon: its jobs go on as they are
            log.exception("edit of %s could not be judged", path)
            return
        self.edit_queue.add(parsed, new)

    def apply_queued_edits(self) -> None:
        """Carry out queued edits for one slice of time; the loop comes straight back for the rest."""
        deadline = time.monotonic() + SLICE_S
        for parsed, job_id in self.edit_queue.take():
            job = self.store.job(job_id)
            if job is not None and job.state is not State.KILLED and job.spec_seen != parsed.saved.digest:
                self.contain(job.id, lambda: self.check_edit(job, parsed))
            if time.monotonic() >= deadline:
                break
        if self.edit_queue:
            self.wake.set()

    def check_edit(self, job: Job, parsed: edits.ParsedFile) -> None:
        """Judge the job against its file's save once per content, then carry out what the edit needs."""
        self.store.update(job.id, spec_seen=parsed.saved.digest)
        try:
            current = runfiles.read_run_spec(Path(job.run_dir))
        except specs.SpecError as error:
            decision: edits.Decision = edits.unreadable_run_spec(error)
        else:
            decision = edits.decide(job, current, parsed)
            if isinstance(decision, edits.Accept) and decision.spec.job.name != current.job.name:
                holder = self.store.name_holder(decision.spec.job.name, job.id)
                decision = edits.keep_name(decision, current, parsed.saved.path, holder)
        if isinstance(decision, edits.Refuse):
            log.info("job %s: edit refused: %s", job.id, decision.message.splitlines()[0])
            self.store.add_event(job.id, EventKind.REFUSED, decision.message)
        elif decision is not None:
            self.apply_edit(job, decision)

    def apply_edit(self, job: Job, edit: edits.Accept) -> None:
        runfiles.write_run_spec(Path(job.run_dir), edit.spec)
        # The events with the row they describe, in one transaction: a paused job's refusal of part of a save
        # was recorded before the row took the rest, and a reader of both saw the old budget beside it.
        with self.store.transaction():
            if edit.refusal:
                self.store.add_event(job.id, EventKind.REFUSED, edit.refusal)
            self.store.add_event(job.id, EventKind.EDIT, edit.summary)
            # algo and env change only with new_identity (a job never started): else they are written unchanged.
            job = self.store.update(job.id, **spec_columns(edit.spec))
        log.info("job %s: edit applied (%s) -> %s", job.id, ", ".join(c.field for c in edit.changes), edit.action)
        if edit.action is EditAction.RELOAD and job.state is State.STARTING:
            self.pending_reload.add(job.id)  # SIGHUP before its handler exists would kill it
        elif edit.action is EditAction.RELOAD:
            self.reload(job.id)
        elif edit.action is EditAction.RESTART:
            self.begin_pause(job, edit.restart_reason)
        elif edit.action is EditAction.REQUEUE:
            self.store.transition(job.id, State.QUEUED,
                                  f"total_steps raised to {edit.spec.job.total_steps} (done at step {job.step})",
                                  not_before=0.0)
        # A reconcile at once only for what the edit set moving: a reconcile of 1,000 jobs took 140 ms, and
        # one after each slice made an edit reaching them take 115 s instead of 29; the once-a-second full
        # reconcile picks up a queued job's new priority or GPUs soon enough.
        if edit.action is not EditAction.NOTHING:
            self.dirty = True
        self.wake.set()
