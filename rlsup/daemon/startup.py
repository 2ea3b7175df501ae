"""The daemon process around its loop: the home's lock, logging, detaching from the terminal."""
from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from pathlib import Path

from rlsup import locks, paths
from rlsup.daemon import scheduler

log = logging.getLogger("rlsup.daemon")


class AlreadyRunning(RuntimeError):
    """Another daemon holds this home's lock."""


def take_lock(home: Path, *, wait_s: float = 1.0) -> int:
    """Hold $RLSUP_HOME/daemon.lock for the daemon's lifetime; its content is our pid."""
    try:
        return locks.acquire(Path(home) / paths.DAEMON_LOCK, wait_s=wait_s)
    except locks.LockHeld:
        raise AlreadyRunning(f"a daemon already runs for {home}") from None


def setup_logging(home: Path, settings: scheduler.Settings) -> None:
    handler = logging.handlers.RotatingFileHandler(Path(home) / paths.DAEMON_LOG, maxBytes=settings.log_max_bytes,
                                                   backupCount=settings.log_backups)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("rlsup")
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def detach_output() -> None:
    """A detached daemon's stdout and stderr lead nowhere (the starting client has gone): send them to
    /dev/null and route uncaught exceptions of every thread to daemon.log instead."""
    sys.excepthook = lambda kind, value, trace: log.critical("uncaught", exc_info=(kind, value, trace))
    threading.excepthook = lambda hook: log.critical("uncaught in thread %s", hook.thread,
                                                     exc_info=(hook.exc_type, hook.exc_value, hook.exc_traceback))
    if sys.stderr is not None and sys.stderr.isatty():
        return  # run by hand in a terminal: keep the terminal
    devnull = os.open(os.devnull, os.O_WRONLY)
    for descriptor in (1, 2):
        os.dup2(devnull, descriptor)
    os.close(devnull)
