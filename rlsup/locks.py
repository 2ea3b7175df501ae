"""Exclusive flock locks whose file names the holder's pid: one daemon per home, one worker per run.

The kernel releases a flock when its holder dies, however it dies, so a lock is never stale; the pid
in the file is only read while the lock is held, to say (or adopt) who holds it.
"""
from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path

from rlsup import own_files


class LockHeld(RuntimeError):
    """Another live process holds the lock."""

    def __init__(self, path: Path, pid: int | None):
        self.path, self.pid = Path(path), pid
        super().__init__(f"{path} is held by pid {pid if pid is not None else '?'}")


@dataclass(frozen=True)
class Holder:
    held: bool
    pid: int | None


def acquire(path: Path, *, wait_s: float = 1.0) -> int:
    """Take the lock for this process's lifetime and write our pid; returns the descriptor to keep open.

    Retries for wait_s because a process checking who holds the lock holds it for an instant.
    """
    descriptor = own_files.open_own(path, os.O_RDWR | os.O_CREAT)  # it is truncated: never through a link
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                pid = _read_pid(descriptor)
                os.close(descriptor)
                raise LockHeld(path, pid) from None
            time.sleep(0.02)
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())
    return descriptor


def holder(path: Path) -> Holder:
    """Whether a live process holds the lock, and its pid; takes the lock for microseconds to find out."""
    try:
        descriptor = own_files.open_own(path, os.O_RDONLY)  # a FIFO would block the daemon's loop
    except (FileNotFoundError, own_files.NotOwnFile):
        return Holder(False, None)  # no worker holds a lock that is no file: starting one refuses the run
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return Holder(True, _read_pid(descriptor))
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return Holder(False, None)
    finally:
        os.close(descriptor)


def _read_pid(descriptor: int) -> int | None:
    text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None
