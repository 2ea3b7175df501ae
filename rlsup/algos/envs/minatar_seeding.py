"""MinAtar's seeded resets, reseeding its generator in place: the same stream at a fiftieth of the cost."""
from __future__ import annotations

from typing import Any

import gymnasium as gym


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
