"""Frames of gymnasium's MuJoCo envs for `rlsup enjoy`: an OpenGL backend that draws off screen, and their rate."""
from __future__ import annotations

import os
import sys

import gymnasium

from rlsup.algos.envs.mujoco_warnings import GYMNASIUM_MUJOCO
from rlsup.formatting import one_line

# MuJoCo picks its OpenGL backend from MUJOCO_GL when it is first imported. Its default, GLFW, needs a
# display: on a headless machine it raised "an OpenGL platform library has not been loaded", and OSMesa was
# not installed there; EGL (a GPU driver's libEGL, or Mesa's software one) drew a Hopper's 480x480 frame.
OFFSCREEN_BACKEND = "egl"


def is_mujoco_env(env_id: str) -> bool:
    """Whether a registered id is one of gymnasium's MuJoCo envs (its imports done: sources.registered_spec)."""
    entry_point = gymnasium.spec(env_id.rpartition(":")[2]).entry_point  # "module:Env-v0" names its module
    return isinstance(entry_point, str) and entry_point.startswith(GYMNASIUM_MUJOCO)


def offscreen_problem(env_id: str) -> str | None:
    """Why MuJoCo cannot draw this env's frames off screen, as a sentence; None when it can. Chooses EGL on
    Linux where MUJOCO_GL says nothing, so call it before mujoco is imported."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("MUJOCO_GL", OFFSCREEN_BACKEND)
    try:
        import mujoco

        context = mujoco.GLContext(1, 1)  # what gymnasium's renderer makes first, at the size of one pixel
        context.make_current()
        context.free()
    except Exception as error:  # any backend may fail in its own way (a missing library, no device)
        backend = os.environ.get("MUJOCO_GL", "glfw")
        return (f"rendering {env_id} needs an OpenGL backend MuJoCo can draw with off screen, and MUJOCO_GL="
                f"{backend} failed ({type(error).__name__}: {one_line(str(error))}); "
                f"set MUJOCO_GL=egl (libEGL, from a GPU driver or Mesa) or MUJOCO_GL=osmesa (libOSMesa)")
    return None


def mujoco_frame_rate(env_id: str) -> float:
    """Frames per second of real time: a MuJoCo env sets its render_fps from its model's time step when it is
    made (Hopper 125, HalfCheetah 20), so its class's metadata has none."""
    env = gymnasium.make(env_id, disable_env_checker=True)
    try:
        return float(env.unwrapped.metadata["render_fps"])
    finally:
        env.close()
