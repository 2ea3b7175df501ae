"""Watches submitted job files (watchdog, debounced): which files were saved and have settled."""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Iterable

from watchdog.events import (FileClosedEvent, FileCreatedEvent, FileModifiedEvent, FileMovedEvent,
                             FileSystemEvent, FileSystemEventHandler)
from watchdog.observers import Observer

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


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: SpecWatcher):
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        for path in (event.src_path, getattr(event, "dest_path", "")):
            if path:
                self.watcher.touched(os.fsdecode(path))
