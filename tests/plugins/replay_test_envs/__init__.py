"""Gymnasium envs rlsup has no capturer for, registered on import: one deterministic, one not."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete

COUNTER_ID = "RlsupTest/Counter-v0"
NOISY_ID = "RlsupTest/Noisy-v0"


class CounterEnv(gym.Env):
    """Deterministic given its reset seed: a walk pushed by the actions, 5 to 40 steps an episode."""

    observation_space = Box(-np.inf, np.inf, (2,), np.float32)
    action_space = Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = 0
        self.length = int(self.np_random.integers(5, 40))
        self.position = float(self.np_random.normal())
        return self._observation(), {"length": self.length}

    def step(self, action):
        self.count += 1
        self.position += (0.1 if action else -0.1) + 0.01 * float(self.np_random.normal())
        reward = float(action) - abs(self.position)
        return self._observation(), reward, self.count >= self.length, False, {"count": self.count}

    def _observation(self) -> np.ndarray:
        return np.array([self.count, self.position], np.float32)


class NoisyEnv(CounterEnv):
    """Not deterministic: every reset and step adds noise from a generator seeded by the OS, not by reset."""

    def __init__(self):
        self.noise = np.random.default_rng()

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        self.position += 0.01 * float(self.noise.normal())
        return self._observation(), info

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        self.position += 0.01 * float(self.noise.normal())
        return self._observation(), reward, terminated, truncated, info


for env_id, entry_point in ((COUNTER_ID, CounterEnv), (NOISY_ID, NoisyEnv)):
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=f"{__name__}:{entry_point.__name__}")
