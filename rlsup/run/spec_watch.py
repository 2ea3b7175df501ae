"""Notices a rewritten job.toml in the run directory: how live edits reach a worker no signal can (one on a cluster)."""
from __future__ import annotations

import os
from pathlib import Path

from rlsup import paths


class RunSpecWatch:
    """Tells whether the run's job.toml was replaced since the worker last read it.

    The daemon writes every accepted edit there atomically (a new file renamed into place), so the
    file's identity and time change; the worker then applies its live fields as on SIGHUP.
    """

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / paths.JOB_FILE
        self.seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_ino, stat.st_mtime_ns, stat.st_size

    def changed(self) -> bool:
        """True once per replacement of job.toml (the caller re-reads it)."""
        stamp = self._stamp()
        if stamp == self.seen:
            return False
        self.seen = stamp
        return True
