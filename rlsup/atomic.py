"""Durable writes: a file is on disk under its name, whole or not at all, before anyone is told it is there."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rlsup import own_files


def fsync_directory(directory: Path) -> None:
    """Make a rename or creation inside directory durable."""
    fsync_file(directory)  # a directory opens read-only and fsyncs like a file


def fsync_file(path: Path) -> None:
    """Put a file's bytes (one written by someone else, say shutil.copytree) on disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_bytes(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write to a temporary file beside path, fsync it, rename it over path, fsync the directory."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    # Made anew (O_EXCL, no link followed): a link planted at this predictable name must not take the write.
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | own_files.GUARD_FLAGS, mode)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    write_bytes(path, text.encode(), mode=mode)


def write_json(path: Path, value: Any, *, mode: int = 0o600) -> None:
    write_text(path, json.dumps(value, indent=1, sort_keys=True) + "\n", mode=mode)
