"""Disk space for a checkpoint: refused before writing when it cannot fit, and named when a write runs out."""
from __future__ import annotations

import errno
import shutil
from pathlib import Path

from rlsup import formatting
from rlsup.checkpoint.manifest import NoSpace


def require(parent: Path, needed: int) -> None:
    """Refuse before writing a byte when the filesystem cannot hold needed bytes."""
    if shutil.disk_usage(parent).free < needed:
        raise NoSpace(message(parent, needed))


def ran_out(error: BaseException | None, parent: Path, needed: int) -> bool:
    """Whether a failed write failed for lack of space: ENOSPC itself (perhaps wrapped by torch), or
    torch's zip writer reporting the short write ("enforce fail at inline_container.cc ... unexpected pos")."""
    if not isinstance(error, (OSError, RuntimeError)):
        return False  # an interrupt, a refused state: never a space problem
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(error, RuntimeError) and ("unexpected pos" in str(error) or "No space left" in str(error)):
            return True
        error = error.__cause__ or error.__context__
    try:
        return shutil.disk_usage(parent).free < needed
    except OSError:
        return False


def message(parent: Path, needed: int) -> str:
    return f"no space left on device: needed about {formatting.byte_size(needed)} in {parent}"
