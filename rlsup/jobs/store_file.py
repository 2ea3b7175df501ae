"""The store's file: made private, opened without the write lock, and a busy, corrupt or lost one told in one line."""
from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Callable, Iterator

from rlsup import paths


class StoreError(sqlite3.DatabaseError):
    """The database cannot be used (a newer schema, a corrupt file, a lost one). A DatabaseError, so that what
    already answers SQLite's errors (the TUI's poller and actions) answers these sentences too."""


class StoreBusy(StoreError):
    """Another process held the write lock for the whole busy timeout: nothing was written."""

    def __init__(self, path: Path, timeout_s: float):
        self.why = f"{path} is busy (another process has held its write lock for {timeout_s:g} s)"
        super().__init__(f"{self.why}; nothing was recorded: try again")


class StoreLost(StoreError):
    """This home had a store, and its file is gone or emptied: a new empty one would hide every job."""


def not_a_store(path: Path, error: Exception) -> StoreError:
    return StoreError(f"{path} is not an rlsup store ({error}); restore it from a backup, or move it aside "
                      f"and delete {made_mark(path)} to begin an empty one")


@contextlib.contextmanager
def translated(path: Path, timeout_s: float) -> Iterator[None]:
    """SQLite's errors on path as StoreError sentences: busy (nothing written), or not a database."""
    try:
        yield
    except StoreError:  # a sentence already (a DatabaseError too)
        raise
    except sqlite3.OperationalError as error:
        text = str(error)
        if "locked" in text or "busy" in text:
            raise StoreBusy(path, timeout_s) from None
        if "unable to open" in text or "readonly" in text:  # a read-only directory or file: not a damaged one
            raise StoreError(f"{path} cannot be opened to write ({error}): rlsup writes it, and beside it its -wal "
                             f"and -shm files; make {Path(path).parent} writable") from None
        if "disk" in text:  # full, or an I/O error
            raise StoreError(f"{path}: {error}; nothing was recorded") from None
        raise not_a_store(path, error) from None
    except sqlite3.DatabaseError as error:  # "file is not a database", "database disk image is malformed"
        raise not_a_store(path, error) from None


def made_mark(path: Path) -> Path:
    """Beside rlsup.db once a store was made there: the file's absence then means it was lost, not never made."""
    return Path(path).with_name(paths.DATABASE + ".made")


def mark_made(path: Path) -> None:
    with contextlib.suppress(FileExistsError):
        os.close(os.open(made_mark(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def refuse_if_lost(path: Path, version: Callable[[], int] = lambda: 0) -> None:
    """Raise StoreLost when a store was made at path and what is there holds no schema: version() read after the
    mark was seen, which comes after the store's first commit, so a store another client is making is seen whole."""
    if made_mark(path).exists() and version() == 0:
        raise StoreLost(f"{path} is missing, empty or another database, but this home had a store, whose jobs a "
                        f"new one would hide: restore it from a backup, or delete {made_mark(path)} to begin an empty "
                        f"store")


def exists(home: Path) -> bool:
    """Whether home has a store to read (a read-only command makes none); raises StoreLost where it was lost."""
    path = Path(home) / paths.DATABASE
    if path.exists():
        return True
    refuse_if_lost(path)
    return False


# The first 16 bytes of every SQLite database file (sqlite.org/fileformat.html, 1.3).
SQLITE_HEADER = b"SQLite format 3\x00"


class FileGuard:
    """The store's file as a daemon opened it. Its path naming no file, another file, or a shorter one means
    the store was deleted, replaced or cut under the daemon, which would go on reading what it holds open
    while clients see another store. SQLite never shrinks the file: rlsup runs no VACUUM. A cut file can
    also grow back before a look: the daemon's own next checkpoint writes its pages at their offsets, around
    the lost header; so the header is read too.

    The guard keeps its own descriptor open for the daemon's life and reads through it: closing any
    descriptor of the file would drop the POSIX locks of the process's SQLite connections (see create_private).
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.descriptor = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        found = os.fstat(self.descriptor)
        self.identity, self.size = (found.st_dev, found.st_ino), found.st_size

    def lost(self) -> str | None:
        """What happened to the file since, or None while it is the one opened."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return "was deleted"
        if (found.st_dev, found.st_ino) != self.identity:
            return "was replaced by another file"
        if found.st_size < self.size:
            return f"was cut from {self.size} to {found.st_size} bytes"
        if found.st_size and os.pread(self.descriptor, len(SQLITE_HEADER), 0) != SQLITE_HEADER:
            return "was cut: it no longer begins as an SQLite database"
        self.size = found.st_size
        return None


def create_private(path: Path) -> None:
    """Create the database file 0600 before SQLite does (SQLite would honour the umask).

    An existing file is never opened here: closing any descriptor of a file drops every POSIX lock
    this process holds on it, including those of SQLite connections already open in this process,
    and a connection that loses its lock may take itself for the last one and delete the WAL.
    """
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    if not Path(path).is_file():
        raise StoreError(f"{path} is not a file: it should be rlsup's store; move it aside")
    if path.stat().st_mode & 0o077:
        path.chmod(0o600)


def turn_to_wal(connection: sqlite3.Connection, timeout_s: float) -> None:
    """Put the file in WAL mode (a read where it already is), waiting up to timeout_s for other connections.

    SQLite answers a switch that meets another connection's lock with SQLITE_BUSY at once, without calling the
    busy handler, so clients making one fresh store together would fail in milliseconds: the wait is ours.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT: a writer takes the lock up front, so read-then-write never deadlocks."""

    def __init__(self, connection: sqlite3.Connection, path: Path, timeout_s: float):
        self.connection, self.path, self.timeout_s = connection, path, timeout_s
        self.outer = False

    def __enter__(self):
        self.outer = not self.connection.in_transaction
        if self.outer:
            with translated(self.path, self.timeout_s):
                self.connection.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type, *rest):
        if not self.outer:
            return
        if exc_type is None:
            self.connection.execute("COMMIT")
        else:
            self.connection.execute("ROLLBACK")
