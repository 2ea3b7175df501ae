"""What an agent chooses in an env: Discrete(n) numbered from 0, or a Box vector with finite bounds; one sentence
for every other space."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from rlsup.formatting import Sentence, counted
from rlsup.spec.registry import ACTION_KINDS

DISCRETE, CONTINUOUS = ACTION_KINDS


class ActionSpaceError(Sentence, ValueError):
    """An action space rlsup cannot train; the message names the env, the space and what is supported."""


@dataclass(frozen=True)
class ActionSpace:
    """The actions of an env: count discrete ones, or a vector of count numbers between low and high."""

    count: int                        # Discrete(n)'s n, or the length of a Box's action vector
    low: tuple[float, ...] = ()       # a continuous action's bounds, one per entry; () for discrete actions
    high: tuple[float, ...] = ()

    @property
    def continuous(self) -> bool:
        return bool(self.low)

    @property
    def kind(self) -> str:
        return CONTINUOUS if self.continuous else DISCRETE

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """low and high as float32 arrays, for scaling a squashed action."""
        return np.asarray(self.low, np.float32), np.asarray(self.high, np.float32)

    def describe(self) -> str:
        """"6 actions", or "a 3-vector in [-1, 1]" for one line of `rlsup validate`."""
        if not self.continuous:
            return counted(self.count, "action")
        low, high = sorted(set(self.low)), sorted(set(self.high))
        # "an 8-vector", "an 11-vector", as they are said.
        article = "an" if str(self.count).startswith("8") or self.count in (11, 18) else "a"
        if len(low) == len(high) == 1:
            return f"{article} {self.count}-vector in [{low[0]:g}, {high[0]:g}]"
        return f"{article} {self.count}-vector in per-entry bounds"


def action_space_of(env_id: str, space: spaces.Space) -> ActionSpace:
    """The ActionSpace of a gymnasium space, or ActionSpaceError naming what does not fit."""
    if isinstance(space, spaces.Discrete):
        if int(space.start) != 0:
            raise ActionSpaceError(f"env id {env_id!r} has the action space {space}, numbered from {space.start}; "
                                   f"rlsup trains Discrete(n) actions numbered from 0")
        return ActionSpace(int(space.n))
    if isinstance(space, spaces.Box):
        return _box_actions(env_id, space)
    raise ActionSpaceError(f"env id {env_id!r} has the action space {space}; rlsup trains Discrete(n) actions and "
                           f"Box vectors with finite bounds, not a {type(space).__name__} (flatten it with a wrapper "
                           f"of your own, registered by [env] imports)")


def _box_actions(env_id: str, space: spaces.Box) -> ActionSpace:
    if len(space.shape) != 1 or space.shape[0] < 1:
        raise ActionSpaceError(f"env id {env_id!r} has the action space {space} of shape {space.shape}; rlsup's "
                               f"policies output a vector (one dimension), so flatten the actions with a wrapper")
    if not np.issubdtype(space.dtype, np.floating):
        raise ActionSpaceError(f"env id {env_id!r} has the action space {space} of {space.dtype}; a Box of actions "
                               f"must hold floats")
    low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ActionSpaceError(f"env id {env_id!r} has the action space {space}, whose bounds are not all finite; "
                               f"rlsup squashes actions into their bounds, so declare the range the env takes "
                               f"with an ActionWrapper of your own whose action_space has finite ones, registered "
                               f"by [env] imports")
    if not (low < high).all():
        raise ActionSpaceError(f"env id {env_id!r} has the action space {space}, with a low bound not below its "
                               f"high one")
    return ActionSpace(int(space.shape[0]), tuple(float(value) for value in low), tuple(float(value) for value in high))


class EnvActions:
    """How an agent's action is handed to one env: an int for Discrete actions; for a Box, the vector in the
    Box's own dtype within its bounds. Also the one format action replay saves them in."""

    def __init__(self, env_id: str, space: spaces.Space) -> None:
        self.space = action_space_of(env_id, space)
        self.continuous = self.space.continuous
        # The Box's own dtype and bounds: the env is handed what its space holds, bit for bit.
        self.dtype = np.dtype(space.dtype) if self.continuous else np.dtype(np.int64)
        self.low = np.asarray(space.low, self.dtype) if self.continuous else None
        self.high = np.asarray(space.high, self.dtype) if self.continuous else None

    def neutral(self) -> int | np.ndarray:
        """An action every env of this space takes: 0, or the middle of the bounds (a check's first step)."""
        if not self.continuous:
            return 0
        return self.within_bounds((self.low.astype(np.float64) + self.high) / 2)

    def within_bounds(self, vector: np.ndarray) -> np.ndarray:
        """The vector in the Box's dtype, clipped to its bounds.

        The policy squashes into the bounds, but tanh in float32 and its scaling to [low, high] may round one
        step past a bound, and a float64 policy's action may round past it when cast: an env that checks
        action_space.contains (a user's own, Box2D's discrete twin) would raise mid-run on it, and MuJoCo would
        take a control outside its ctrlrange. Clipping after the cast leaves every in-bound action as it is."""
        return np.clip(np.asarray(vector).astype(self.dtype), self.low, self.high)

    def saved(self, actions: list[Any]) -> np.ndarray:
        """An episode's actions as one array: int64 [n] for discrete ones (the format of older checkpoints),
        [n, count] in the Box's dtype for continuous ones."""
        if not self.continuous:
            return np.array(actions, dtype=np.int64)
        if not actions:
            return np.zeros((0, self.space.count), self.dtype)
        return np.stack(actions).astype(self.dtype, copy=False)

    def loaded(self, saved: Any) -> list[Any] | str:
        """The actions of saved() back, each as the env was handed it; what does not fit, as the end of a
        sentence. Only arrays are read (a checkpoint may come from a stranger)."""
        array = np.asarray(saved)
        if not self.continuous:
            if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
                return f"holds actions of {array.dtype}{list(array.shape)}, not this env's discrete ones"
            return [int(action) for action in array]
        expected = (array.shape[0] if array.ndim else -1, self.space.count)
        if array.shape != expected or array.dtype != self.dtype:
            return (f"holds actions of {array.dtype}{list(array.shape)}, not this env's {self.dtype} "
                    f"vectors of {self.space.count}")
        return [row.copy() for row in array]
