"""Gymnasium's MuJoCo envs captured mid-episode: MuJoCo's whole integration state and the kinematics envs read.

mujoco is imported inside the functions only: it takes 0.2 s to import, which every env process of a job on
another env would pay for nothing.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from rlsup.algos.envs.sources import EnvError

# The MuJoCo env classes captured by their physics, by exact type. Read in gymnasium 1.4's sources: between
# a reset and the next, each keeps nothing of its own but MuJoCo's data and np_random (Reacher's goal and
# Pusher's goal_pos and cylinder_pos are written and read by reset_model only, their qpos holds the rest).
# A subclass of one of them, or another version, may keep more: it goes through action replay instead.
CAPTURED_CLASSES = frozenset(f"gymnasium.envs.mujoco.{module}.{name}" for module, name in (
    ("ant_v5", "AntEnv"), ("half_cheetah_v5", "HalfCheetahEnv"), ("hopper_v5", "HopperEnv"),
    ("humanoid_v5", "HumanoidEnv"), ("humanoidstandup_v5", "HumanoidStandupEnv"),
    ("inverted_double_pendulum_v5", "InvertedDoublePendulumEnv"), ("inverted_pendulum_v5", "InvertedPendulumEnv"),
    ("pusher_v5", "PusherEnv"), ("reacher_v5", "ReacherEnv"), ("swimmer_v5", "SwimmerEnv"),
    ("walker2d_v5", "Walker2dEnv"),
))

# Results of MuJoCo's kinematics that envs read between steps and mj_setState does not bring back: mj_step
# leaves them at the positions before its last integration, and Ant's reward reads the torso's xpos, and
# Humanoid's its xipos, before stepping. Restoring the integration state alone, with or without mj_forward,
# changed both envs' first reward after a resume. The geoms' and sites' poses are what a frame draws.
KINEMATICS = ("xpos", "xquat", "xmat", "xipos", "ximat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat",
              "subtree_com")


def is_captured(layer_type: type) -> bool:
    return f"{layer_type.__module__}.{layer_type.__qualname__}" in CAPTURED_CLASSES


def capture_physics(game: Any) -> dict:
    """MuJoCo's whole integration state (time, qpos, qvel, act, warm start, controls, applied forces, mocap,
    userdata, plugin state…) and the kinematics envs read, as float64 arrays."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(game.model, spec), np.float64)
    mujoco.mj_getState(game.model, game.data, state, spec)
    return {"physics": state, "kinematics": {name: getattr(game.data, name).copy() for name in KINEMATICS}}


def restore_physics(game: Any, state: dict) -> None:
    """Put a capture_physics state back; EnvError naming what does not fit this env's model (never a crash
    in C on a stranger's array)."""
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    size = mujoco.mj_stateSize(game.model, spec)
    physics = _checked(state["physics"], np.empty(size, np.float64), "MuJoCo state")
    kinematics = {name: _checked(state["kinematics"][name], getattr(game.data, name), name) for name in KINEMATICS}
    mujoco.mj_setState(game.model, game.data, np.ascontiguousarray(physics), spec)
    for name, saved in kinematics.items():
        np.copyto(getattr(game.data, name), saved)


def _checked(saved: Any, current: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(saved)
    if array.shape != current.shape or array.dtype != current.dtype:
        raise EnvError(f"the saved {name} is {array.dtype}{list(array.shape)}, this env's model holds "
                       f"{current.dtype}{list(current.shape)}")
    return array
