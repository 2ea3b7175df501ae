"""Tiny test envs with continuous and composite action spaces, registered when this module is imported (name it in
[env] imports; for another process, put tests/ on its PYTHONPATH with TESTS_DIRECTORY)."""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiDiscrete, Tuple

MODULE = "continuous_envs"
TESTS_DIRECTORY = Path(__file__).parent
DRIFT_ID = "ContinuousTests/Drift-v0"            # Box(-1, 1, (2,), float32): a point pushed by its actions
DRIFT64_ID = "ContinuousTests/Drift64-v0"        # the same with a float64 Box
# Spaces rlsup refuses, each with the words its sentence must hold.
REFUSED = {
    "ContinuousTests/DictActions-v0": "not a Dict",
    "ContinuousTests/TupleActions-v0": "not a Tuple",
    "ContinuousTests/MultiDiscreteActions-v0": "not a MultiDiscrete",
    "ContinuousTests/InfiniteBox-v0": "whose bounds are not all finite",
    "ContinuousTests/MatrixBox-v0": "of shape (2, 2)",
    "ContinuousTests/IntegerBox-v0": "must hold floats",
}


class Drift(gym.Env):
    """A point in the plane moved by each action, with a drift drawn at every step from its np_random (so that a
    resume must bring the generator back too): deterministic for a seeded reset and the same actions."""

    observation_space = Box(-np.inf, np.inf, (2,), np.float32)
    action_space = Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1.0, 1.0, size=2)
        self.steps = 0
        self.received: list[np.ndarray] = []
        return self.position.astype(np.float32), {}

    def step(self, action):
        self.received.append(action)
        self.position = self.position + 0.1 * action + self.np_random.normal(0.0, 0.01, size=2)
        self.steps += 1
        reward = -float(np.linalg.norm(self.position))
        return self.position.astype(np.float32), reward, self.steps >= 25, False, {}


class Drift64(Drift):
    action_space = Box(-1.0, 1.0, (2,), np.float64)


def refusing(space: gym.Space) -> type:
    """The drift with an action space rlsup does not train."""
    return type("Refusing", (Drift,), {"action_space": space})


REFUSED_SPACES = {
    "ContinuousTests/DictActions-v0": Dict({"push": Box(-1.0, 1.0, (2,), np.float32), "jump": Discrete(2)}),
    "ContinuousTests/TupleActions-v0": Tuple((Box(-1.0, 1.0, (2,), np.float32), Discrete(2))),
    "ContinuousTests/MultiDiscreteActions-v0": MultiDiscrete([3, 3]),
    "ContinuousTests/InfiniteBox-v0": Box(-np.inf, np.inf, (2,), np.float32),
    "ContinuousTests/MatrixBox-v0": Box(-1.0, 1.0, (2, 2), np.float32),
    "ContinuousTests/IntegerBox-v0": Box(-1, 1, (2,), np.int64),
}

gym.register(DRIFT_ID, entry_point=Drift, max_episode_steps=40)
gym.register(DRIFT64_ID, entry_point=Drift64, max_episode_steps=40)
for env_id, space in REFUSED_SPACES.items():
    gym.register(env_id, entry_point=refusing(space))
