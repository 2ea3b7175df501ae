"""Watches submitted job files (watchdog, debounced) and applies their edits as DESIGN.md section 5 says."""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Iterable

from watchdog.events import (FileClosedEvent, FileCreatedEvent, FileModifiedEvent, FileMovedEvent,
                             FileSystemEvent, FileSystemEventHandler)
from watchdog.observers import Observer

from rlsup import jobstate, runfiles, spec as specs
from rlsup import client
from rlsup.jobstate import State
from rlsup.jobview import jobs_following
from rlsup.store import Job

log = logging.getLogger("rlsup.daemon")

# Opening or reading a file is no edit: the daemon reads these files itself.
WRITE_EVENTS = [FileModifiedEvent, FileCreatedEvent, FileMovedEvent, FileClosedEvent]


class SpecWatcher:
    """Collects write events on watched files; due() returns those quiet for debounce_s.

    Editors save in bursts (truncate + write, or write a temporary file and rename it over the
    original), so an edit is applied only once its file has been quiet for a moment.
    """

    def __init__(self, debounce_s: float, wake: threading.Event | None = None):
        self.debounce_s = debounce_s
        self.wake = wake
        self.lock = threading.Lock()
        self.files: set[str] = set()
        self.pending: dict[str, float] = {}
        self.watches: dict[str, object] = {}
        self.unwatchable: set[str] = set()   # reported once, retried quietly
        self.observer = Observer()
        self.observer.daemon = True
        self.handler = _Handler(self)

    def start(self) -> None:
        self.observer.start()

    def stop(self) -> None:
        self.observer.stop()
        self.observer.join(timeout=5)

    def watch(self, files: Iterable[str | Path]) -> None:
        """Watch exactly these files (their directories, since editors replace files)."""
        wanted = {os.path.normpath(str(path)) for path in files}
        with self.lock:
            self.files = wanted
        directories = {os.path.dirname(path) for path in wanted}
        for directory in directories - set(self.watches):
            try:
                self.watches[directory] = self.observer.schedule(self.handler, directory, recursive=False,
                                                                 event_filter=WRITE_EVENTS)
            except OSError as error:  # a vanished or unreadable directory: retried on the next call
                if directory not in self.unwatchable:
                    self.unwatchable.add(directory)
                    log.warning("cannot watch %s: %s", directory, error)
        for directory in set(self.watches) - directories:
            self.observer.unschedule(self.watches.pop(directory))

    def touched(self, path: str) -> None:
        path = os.path.normpath(path)
        with self.lock:
            if path not in self.files:
                return
            self.pending[path] = time.monotonic()
        if self.wake is not None:
            self.wake.set()

    def due(self) -> list[str]:
        """Files whose last write is at least debounce_s old; each is reported once per burst."""
        now = time.monotonic()
        with self.lock:
            ready = [path for path, when in self.pending.items() if now - when >= self.debounce_s]
            for path in ready:
                del self.pending[path]
        return ready

    def seconds_to_next(self) -> float | None:
        """How long until the next pending file settles (the daemon's loop sleeps at most this)."""
        with self.lock:
            if not self.pending:
                return None
            oldest = min(self.pending.values())
        return max(0.0, oldest + self.debounce_s - time.monotonic())


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: SpecWatcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                self.watcher.touched(os.fsdecode(path))


# ---------------------------------------------------------------------------------------------
# Applying a settled edit (DESIGN.md section 5)


class EditApplier:
    """Turns a changed job file into an accepted spec plus an action, or a refused event."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.store = daemon.store

    def check_file(self, path: str) -> None:
        for job in jobs_following(path, self.store.jobs()):
            self.daemon.contain(job.id, lambda job=job: self.check_job(job))

    def check_job(self, job: Job) -> None:
        path = Path(job.spec_path)
        try:
            data = path.read_bytes()
        except OSError:
            return  # removed, or mid-rename by an editor: the job goes on with what it has
        digest = client.file_digest(data)
        if digest == job.spec_seen:
            return  # saved without a change, or already judged
        self.store.update(job.id, spec_seen=digest)
        text = data.decode("utf-8", errors="replace")
        try:
            edited = client.apply_overrides(specs.loads(text, file=str(path), default_name=path.stem),
                                            job.override_values)
            changes = runfiles.accept_edit(Path(job.run_dir), edited)
        except specs.SpecError as error:
            self.refuse(job, f"{error}\nthe job goes on with its current spec")
            return
        except runfiles.EditRefused as refusal:
            if job.state is State.QUEUED and job.started is None:
                # Nothing has been learned yet: the file may still say what the run is.
                runfiles.write_run_spec(Path(job.run_dir), edited)
                self.store.update(job.id, algo=edited.job.algo, env=edited.env.id)
                changes = refusal.changes
            else:
                self.refuse(job, identity_message(str(path), text, refusal.changes))
                return
        if changes:
            self.accept(job, edited, changes)

    def refuse(self, job: Job, message: str) -> None:
        log.info("job %s: edit refused: %s", job.id, message.splitlines()[0])
        self.store.add_event(job.id, "refused", message)

    def accept(self, job: Job, edited: specs.JobSpec, changes: list[specs.Change]) -> None:
        self.store.add_event(job.id, "edit", "applied: " + "; ".join(str(change) for change in changes))
        job = self.store.update(job.id, name=edited.job.name, priority=edited.job.priority,
                                total_steps=edited.job.total_steps, max_restarts=edited.job.max_restarts,
                                gpus_wanted=edited.job.gpus)
        action = jobstate.edit_action(job.state, live_only=specs.only_live(changes),
                                      total_steps=edited.job.total_steps, step_reached=job.step)
        log.info("job %s: edit applied (%s) -> %s", job.id, ", ".join(c.field for c in changes), action)
        if action == jobstate.EDIT_RELOAD:
            if job.state is State.STARTING:
                self.daemon.pending_reload.add(job.id)  # SIGHUP before its handler exists would kill it
            else:
                self.daemon.reload(job.id)
        elif action == jobstate.EDIT_RESTART:
            fields = ", ".join(change.field for change in changes if change.edit != specs.LIVE)
            self.daemon.begin_pause(job, f"edit of {fields} applies by pause and resume")
        elif action == jobstate.EDIT_REQUEUE:
            self.store.transition(job.id, State.QUEUED,
                                  f"total_steps raised to {edited.job.total_steps} (done at step {job.step})",
                                  not_before=0.0)
        self.daemon.dirty = True
        self.daemon.wake.set()


def identity_message(file: str, text: str, changes: list[specs.Change]) -> str:
    """FILE:LINE: field: old -> new for each refused field, then what to do instead."""
    lines = specs.locate_keys(text)
    located = []
    for change in specs.refused(changes):
        line = _line_of(lines, field_path(change.field))
        where = f"{file}:{line}" if line else file
        located.append(f"{where}: {change}: defines what the run learns, refused")
    return "\n".join(located) + "\nstart a new run to use them; the job goes on with its current spec"


def field_path(dotted: str) -> tuple:
    """'replay[0].capacity' -> ('replay', 0, 'capacity'), the key form of spec.locate_keys."""
    parts: list = []
    for piece in dotted.split("."):
        match = re.fullmatch(r"(.+?)\[(\d+)\]", piece)
        parts.extend((match.group(1), int(match.group(2))) if match else (piece,))
    return tuple(parts)


def _line_of(lines: dict[tuple, int], path: tuple) -> int | None:
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None
