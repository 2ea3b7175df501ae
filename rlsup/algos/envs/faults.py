"""A training env's answers checked: one that raises, or returns what no network learns from, is named in a sentence."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from rlsup.algos.envs.actions import EnvActions
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.observations import ObservationLayout
from rlsup.formatting import one_line

# Replays and networks hold rewards as float32: a larger one would be stored as infinity.
FLOAT32_MAX = float(np.finfo(np.float32).max)
# How a fault raised by the env itself ends: a worker logs the traceback (rlsup validate has no worker.log).
TRACEBACK_NOTE = " (its traceback is in worker.log)"


class EnvFault(EnvError):
    """The env raised during training, or returned an observation or a reward rlsup cannot learn from."""


class ActionFault(EnvFault):
    """An action the policy produced that no env may be handed: NaN or infinite, or of the wrong length."""


class EnvChecks:
    """What one env hands back, checked on every call: a shape, a finiteness and a range test, so that a
    faulty env stops its run with a sentence saying what it did, not hours of NaN weights or a traceback
    from deep inside a replay. The continuous actions it is handed are checked too: a diverged learner's NaN
    would otherwise be blamed on the env, or not seen at all (handed a NaN torque, Hopper-v5 reset its physics
    mid-episode and returned a NaN reward, Pendulum-v1 NaN observations, and LunarLanderContinuous-v3 stepped
    on as if no engine had fired)."""

    def __init__(self, env_id: str, space: gym.Space, layout: ObservationLayout,
                 actions: EnvActions | None = None) -> None:
        self.env_id = env_id
        self.space = space
        self.layout = layout
        self.actions = actions
        self.shape = tuple(space.shape)
        # Bytes (uint8 and bool images, Atari stacks) hold no NaN: only float observations need looking at.
        self.floating = bool(np.issubdtype(layout.dtype, np.floating))

    def raised(self, call: str, error: Exception) -> EnvFault:
        """The fault to raise from the env's own exception (chained to it, so worker.log shows its frames)."""
        return EnvFault(f"env {self.env_id!r} raised in {call}: {type(error).__name__}: {one_line(str(error))}"
                        f"{TRACEBACK_NOTE}")

    def observation(self, observation: Any, steps: int | None) -> np.ndarray:
        """The observation in the env's layout, refused when it does not fit the space or holds NaN or
        infinity; steps: how many the episode has taken (None: it came from reset)."""
        if getattr(observation, "shape", None) != self.shape:
            self._check_shape(observation, steps)  # a list, or the wrong shape
        converted = self.layout.convert(observation)
        if self.floating and not np.isfinite(converted).all():
            raise EnvFault(f"{self._returned('an observation holding NaN or infinity', steps)}, which no network "
                           "can learn from")
        return converted

    def action(self, action: Any, steps: int) -> int | np.ndarray:
        """What the env is handed for the policy's action: an int, or the vector in the Box's dtype within its
        bounds; steps: how many the episode has taken before this one."""
        if self.actions is None or not self.actions.continuous:
            return int(action)
        vector = np.asarray(action)
        count = self.actions.space.count
        if vector.shape != (count,):
            raise ActionFault(f"the policy produced an action of shape {vector.shape} at step {steps + 1} of an "
                              f"episode of env {self.env_id!r}, whose actions are {self.actions.space.describe()}")
        if not np.isfinite(vector).all():
            raise ActionFault(f"the policy produced the non-finite action {vector.tolist()} at step {steps + 1} "
                              f"of an episode of env {self.env_id!r}: the learner has diverged (its weights hold "
                              f"NaN or infinity); resume from an earlier checkpoint with a lower learning rate")
        return self.actions.within_bounds(vector)

    def reward(self, reward: float, steps: int) -> None:
        if not abs(reward) <= FLOAT32_MAX:  # false for NaN as for the infinities
            raise EnvFault(f"{self._returned(f'the reward {reward!r}', steps)}, not a finite float32, which "
                           "replays and networks hold rewards as")

    def _check_shape(self, observation: Any, steps: int | None) -> None:
        try:
            shape = np.shape(observation)
        except ValueError:  # a ragged sequence
            shape = None
        if shape != self.shape:
            what = f"an observation of shape {shape}" if shape is not None else "a ragged observation"
            raise EnvFault(f"{self._returned(what, steps)}; its observation space is {self.space}")

    def _returned(self, what: str, steps: int | None) -> str:
        when = "from reset" if steps is None else f"after {steps} step{'s' if steps != 1 else ''} of its episode"
        return f"env {self.env_id!r} returned {what} {when}"
