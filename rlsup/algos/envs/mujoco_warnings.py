"""Where MuJoCo's warnings go: worker.log, not stderr and a MUJOCO_LOG.TXT in the working directory."""
from __future__ import annotations

import logging
import sys
from typing import Any

from rlsup.run.log import FILE_ONLY

log = logging.getLogger("rlsup.envs")

GYMNASIUM_MUJOCO = "gymnasium.envs.mujoco"


def route_mujoco_warnings(entry_point: Any) -> None:
    """Send MuJoCo's warnings to worker.log (as info, so that `rlsup validate` stays quiet), not to stderr and
    a MUJOCO_LOG.TXT in the working directory: mujoco 4's compiler warns on every HalfCheetah made
    ("settotalmass is deprecated"), which put that file in the working directory of every process making one.
    Called before an env is made (gymnasium's MuJoCo envs) and after (anyone's, once mujoco is imported)."""
    is_gymnasiums = isinstance(entry_point, str) and entry_point.startswith(GYMNASIUM_MUJOCO)
    if not is_gymnasiums and "mujoco" not in sys.modules:
        return
    try:
        import mujoco
    except ImportError:
        return  # gym.make says which extra installs it
    if mujoco.get_mju_user_warning() is None:  # a handler of the user's own stays
        mujoco.set_mju_user_warning(_log_warning)


def _log_warning(text: str) -> None:
    log.info("MuJoCo: %s", text, extra=FILE_ONLY)
