"""MinAtar's resets: seeded by reseeding its generator in place, and the last action they leave alone."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def is_minatar(stack: gym.Env) -> bool:
    """Whether the stack's base env is MinAtar's gymnasium env (its module, so that MinAtar stays optional)."""
    return type(stack.unwrapped).__module__.startswith("minatar.") and hasattr(stack.unwrapped, "game")


class ReseedInPlace(gym.Wrapper):
    """A reset with a seed reseeds MinAtar's RandomState instead of letting MinAtar build a new one.

    rlsup seeds every reset (the action-replay resume replays an episode from its seed), and MinAtar's
    `Environment.seed` makes a new `np.random.RandomState(seed)` each time: about 65 us against 1 us for
    `RandomState.seed(seed)`, which starts the identical stream. Under random play, whose episodes last
    ten-odd steps, that was a third of the step time. Like MinAtar, the game's own generator is then the
    same object as the wrapper's, so sticky actions and the game draw from one stream as before.
    """

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            game = self.env.unwrapped.game
            game.random.seed(seed)
            game.env.random = game.random
        return self.env.reset(seed=None, options=options)


class LastActionCarry:
    """MinAtar's Environment keeps its last action across resets, and a sticky first step (one in ten)
    repeats it: the action an episode started with, which action replay saves beside the reset seed."""

    def __init__(self, stack: gym.Env) -> None:
        self._game = stack.unwrapped.game

    def capture(self) -> dict:
        return {"last_action": int(self._game.last_action)}

    def restore(self, state: dict) -> str | None:
        # A checkpoint may come from a stranger: an action outside the game's would fail its next sticky step.
        action = state.get("last_action") if isinstance(state, dict) else None
        if isinstance(action, (int, np.integer)) and 0 <= int(action) < self._game.num_actions():
            self._game.last_action = int(action)
            return None
        return f"carried a last action of {action!r}, not one of the game's {self._game.num_actions()}"


def reset_carry(stack: gym.Env) -> LastActionCarry | None:
    """What the stack's game keeps across its resets, where it keeps anything (MinAtar)."""
    return LastActionCarry(stack) if is_minatar(stack) else None
