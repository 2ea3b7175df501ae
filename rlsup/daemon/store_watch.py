"""The daemon's watch on its store: a file deleted, replaced, cut or damaged under it stops it with one line."""
from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Callable

from rlsup.jobs.store_file import FileGuard

log = logging.getLogger("rlsup.daemon")


class StoreWatch:
    """Whether the store the daemon reads is still the one clients see, and still readable.

    A daemon that read on from an unlinked store made new submits wait for ever and `pause 1` pause another job
    than the one listed; one that took a store damaged in place for its jobs' fault failed every job, killing
    every worker without a checkpoint. Either way it now stops (exit 3), its workers running on.
    """

    def __init__(self, path: Path, stop: Callable[[], None]):
        self.path = Path(path)
        self.guard = FileGuard(self.path)
        self.stop = stop
        self.lost = False
        self.last_trouble = ""

    def check(self) -> bool:
        """Stop when the file at the store's path is not the one opened; True when the daemon stops."""
        what = self.guard.lost()
        if what:
            self.stop_for(what)
        return bool(what)

    def unreadable(self, error: sqlite3.DatabaseError) -> bool:
        """Stop for an error of the file itself ("malformed", "not a database"), and say so with True; other
        database errors (a constraint, a query) are not the store's."""
        if type(error) is not sqlite3.DatabaseError:
            return False
        self.stop_for(f"cannot be read ({error})")
        return True

    def trouble(self, error: sqlite3.DatabaseError) -> None:
        """An error of the store that is not its file's (a full disk, a constraint), which the loop retries each
        round: said once while it repeats, since a line each round would fill the log, and a full disk with it."""
        if str(error) != self.last_trouble:
            log.warning("the store failed (%s: %s); the daemon tries again each round", type(error).__name__, error)
        self.last_trouble = str(error)

    def stop_for(self, what: str) -> None:
        if not self.lost:
            log.error("%s %s: the daemon stops, its workers keep running; restore the store, then start the "
                      "daemon again", self.path, what)
        self.lost = True
        self.stop()
