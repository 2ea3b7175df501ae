"""Opening a run's files without following links: a run directory may come from a stranger (docs/guides/security.md)."""
from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from rlsup.formatting import Sentence

# O_NOFOLLOW: a link in a received run must not carry a write (or a read) to a file outside it.
# O_NONBLOCK: opening a FIFO to read would wait for a writer for ever, and to write fails at once (ENXIO)
# instead of waiting for a reader; regular files ignore it.
GUARD_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_ACCESS = os.O_WRONLY | os.O_RDWR
# What an open refused by GUARD_FLAGS fails with: a link, a FIFO without a reader or a socket, a directory.
_NOT_A_FILE = {errno.ELOOP: "is a symbolic link", errno.ENXIO: "is a FIFO or a socket",
               errno.EISDIR: "is a directory", errno.ENOTDIR: "has a part that is not a directory"}
# A JSON file rlsup writes in a run (a status, a manifest) or its job.toml is a few kB; a bigger one is damage,
# or a received run's trap (a sparse 2 GiB job.toml held 4.1 GiB for 12-26 s), not something to hold.
LIMIT_BYTES = 16 << 20


class NotOwnFile(Sentence, OSError):
    """Where rlsup keeps a file of its own there is something else: a link, a FIFO, a device, a directory."""


def refusal(path: Path, what: str) -> NotOwnFile:
    return NotOwnFile(f"{path} {what}: rlsup keeps only regular files and directories of its own in a run, and "
                      "never writes or reads through a link (a run received from someone else?); nothing was changed")


def open_own(path: Path, flags: int, mode: int = 0o600) -> int:
    """os.open of a file rlsup keeps in a run: never through a link, only a regular file, and for writing one
    with no other hard link (writing it would change a file elsewhere). Raises NotOwnFile otherwise."""
    try:
        descriptor = os.open(path, flags | GUARD_FLAGS, mode)
    except OSError as error:
        if error.errno in _NOT_A_FILE:
            raise refusal(path, _NOT_A_FILE[error.errno]) from None
        raise
    try:
        check_regular(descriptor, path, writing=bool(flags & _WRITE_ACCESS))
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def check_regular(descriptor: int, path: Path, *, writing: bool) -> os.stat_result:
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        raise refusal(path, "is not a regular file")
    if writing and status.st_nlink > 1:
        raise refusal(path, f"has {status.st_nlink - 1} other hard link(s)")
    return status


def append_binary(path: Path):
    """A file of the run opened to append bytes (created 0600), unbuffered: metrics.jsonl."""
    return os.fdopen(open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab", buffering=0)


def append_text(path: Path):
    """A file of the run opened to append text (created 0600): worker.log."""
    return os.fdopen(open_own(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a", encoding="utf-8")


def read_bytes(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes when it holds at most limit of them, else None; never a link, never a FIFO."""
    with os.fdopen(open_own(path, os.O_RDONLY), "rb") as handle:
        # By its size: read(limit + 1) would allocate all of it up front, 16 MiB for each few-kB manifest listed.
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(size + 1) if size <= limit else None
    return data if data is not None and len(data) <= limit else None


def read_json(path: Path) -> dict | None:
    """A JSON object from path, or None when it is missing, half-written, or not a regular file (a link, a FIFO
    that would block the read for ever)."""
    try:
        value = json.loads(read_bytes(Path(path), LIMIT_BYTES) or b"")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_small(path: Path) -> bytes:
    """A small file of the run (its job.toml) whole, as read_json reads a status: never through a link (a run's
    file, unlike a user's job file, is not theirs to point elsewhere), never a FIFO, never past LIMIT_BYTES.
    Raises NotOwnFile, FileNotFoundError or OSError."""
    data = read_bytes(Path(path), LIMIT_BYTES)
    if data is None:
        raise NotOwnFile(f"{path} is larger than {LIMIT_BYTES >> 20} MiB, far more than rlsup writes there (a few kB): "
                         "not read")
    return data


def read_regular(path: Path) -> bytes:
    """A file's bytes, links followed (a user's job file may be one), but only from a regular file: a FIFO would
    block the read, and with it a command or the daemon's loop, for ever. Raises OSError otherwise."""
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a socket or a device): not read", str(path))
        return handle.read()


def own_directory(path: Path) -> Path:
    """A directory of the run (spec-history, checkpoints, tensorboard), made 0700 when missing; never a link."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    if path.is_symlink() or not path.is_dir():
        raise refusal(path, "is a symbolic link" if path.is_symlink() else "is not a directory")
    return path


def open_beneath(top: Path, parts: tuple[str, ...]) -> int:
    """A regular file top/parts... opened to read with no link on the way, top included (a fork's
    parent-checkpoint/ linked to a checkpoint outside its run), each directory opened relative to the last, so
    none can be swapped for a link in between. Raises NotOwnFile or FileNotFoundError."""
    # Without O_DIRECTORY, which makes a link fail as ENOTDIR rather than ELOOP: one that is no directory fails
    # as the next part is opened beneath it.
    directory = _open_step(str(top), os.O_RDONLY, None, Path(top))
    try:
        for part in parts[:-1]:
            inner = _open_step(part, os.O_RDONLY | os.O_DIRECTORY, directory, Path(top, *parts))
            os.close(directory)
            directory = inner
        descriptor = _open_step(parts[-1], os.O_RDONLY, directory, Path(top, *parts))
    finally:
        os.close(directory)
    try:
        check_regular(descriptor, Path(top, *parts), writing=False)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


def _open_step(name: str, flags: int, directory: int | None, whole: Path) -> int:
    try:
        return os.open(name, flags | GUARD_FLAGS, dir_fd=directory)
    except OSError as error:
        if error.errno in _NOT_A_FILE:
            raise refusal(whole, _NOT_A_FILE[error.errno]) from None
        raise
