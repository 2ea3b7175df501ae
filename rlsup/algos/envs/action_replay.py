"""Seeded action replay: any deterministic env resumed mid-episode from its reset seed and the actions since."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from rlsup.algos.envs.actions import EnvActions
from rlsup.algos.envs.sources import EnvError
from rlsup.checkpoint.rng import generator_state, restore_generator

# Reset seeds are drawn below 2**31: some envs hand the seed to C code that takes a signed 32-bit int.
RESET_SEED_BOUND = 2**31 - 1


@dataclass(frozen=True)
class ReplayMismatch:
    """A saved episode that replaying its actions did not reproduce: the env is not deterministic."""

    env_id: str
    actions: int  # how many actions were replayed after the seeded reset
    detail: str   # what differed, as the end of a sentence

    def sentence(self, index: int) -> str:
        """One line for worker.log, the checkpoint listing and the TUI, naming the env by index and id."""
        return (f"env {index} ({self.env_id}): replaying the {self.actions} actions since its seeded reset "
                f"{self.detail}, so this env is not deterministic; its episode was dropped and a fresh one "
                f"started")


class ResetCarry(Protocol):
    """What a game keeps across its own resets, which a seeded reset therefore does not rebuild (MinAtar's
    last action, which a sticky first step repeats): taken at each reset, put back before a replay."""

    def capture(self) -> dict: ...

    def restore(self, state: dict) -> str | None:
        """Put a captured carry back; what is wrong with it (the end of a sentence), or None."""
        ...


class ActionReplay:
    """The state of an env as the seed of its last reset, the actions since, and a digest of where they led.

    Every reset is seeded, from a generator of the env's own, so that replaying them reaches the same
    state in a deterministic env; the digest of the last observation and info tells when it does not.
    A game that keeps state across its resets names it in a ResetCarry, saved with the seed. Actions are
    kept as the env was handed them (EnvActions): ints, or vectors in the Box's own dtype, every bit.
    """

    kind = "replay"

    def __init__(self, stack: gym.Env, env_id: str, seed: int, carry: ResetCarry | None = None,
                 actions: EnvActions | None = None):
        self._stack = stack
        self._env_id = env_id
        self._format = actions or EnvActions(env_id, stack.action_space)
        self._seeds = np.random.Generator(np.random.PCG64(seed))
        self._reset_seed: int | None = None
        self._actions: list[int | np.ndarray] = []
        self._carry = carry
        self._carried: dict | None = None  # the carry as the last reset left it
        # The last observation, info and whether it ended the episode, digested only when a checkpoint asks.
        self._last: tuple[Any, Any, bool] = (None, None, False)

    def reset_seed(self, pending_seed: int | None) -> int:
        """The seed of the next reset: the env's own seed first, then one drawn from its generator."""
        return pending_seed if pending_seed is not None else int(self._seeds.integers(RESET_SEED_BOUND))

    def record_reset(self, seed: int | None, observation: Any, info: Any) -> None:
        self._reset_seed, self._actions, self._last = seed, [], (observation, info, False)
        self._carried = self._carry.capture() if self._carry is not None else None

    def record_step(self, action: int | np.ndarray, observation: Any, info: Any, ended: bool) -> None:
        self._actions.append(action)
        self._last = (observation, info, ended)

    def capture(self) -> dict:
        return {"seeds": generator_state(self._seeds), "reset_seed": self._reset_seed,
                "actions": self._format.saved(self._actions), "digest": self._digest(),
                "carried": self._carried}

    def restore(self, state: dict) -> ReplayMismatch | None:
        """Reset with the saved seed and replay the saved actions; None when it reached the saved state."""
        self._seeds = restore_generator(state["seeds"])
        reset_seed = state["reset_seed"]
        actions = self._format.loaded(state["actions"])
        if isinstance(actions, str):
            raise EnvError(f"{self._env_id}: the saved action replay {actions}")
        if reset_seed is None:  # never reset: there is no episode to rebuild
            self._reset_seed, self._actions, self._last = None, [], (None, None, False)
            return None
        observation, info = self._stack.reset(seed=int(reset_seed))
        # A checkpoint from before carries were saved has none: its replay is what it always was.
        carried = state.get("carried")
        if carried is not None and self._carry is not None:
            problem = self._carry.restore(carried)
            if problem is not None:
                return ReplayMismatch(self._env_id, len(actions), problem)
        self.record_reset(int(reset_seed), observation, info)
        for count, action in enumerate(actions):
            observation, _, terminated, truncated, info = self._stack.step(action)
            self.record_step(action, observation, info, bool(terminated or truncated))
            # An end before the last action: stepping on would act on a finished episode.
            if (terminated or truncated) and count + 1 < len(actions):
                return ReplayMismatch(self._env_id, len(actions), f"ended the episode after {count + 1}")
        if self._digest() != state["digest"]:
            return ReplayMismatch(self._env_id, len(actions), "did not reproduce the saved observation")
        return None

    def _digest(self) -> str:
        return stable_digest(self._last)


def stable_digest(value: Any) -> str:
    """sha256 of a tree of arrays, numbers, strings, dicts and sequences, the same in every process."""
    hasher = hashlib.sha256()
    _feed(hasher, value)
    return hasher.hexdigest()


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype != object:
        array = np.ascontiguousarray(value)
        hasher.update(f"array {array.dtype.str} {array.shape}:".encode())
        hasher.update(array.tobytes())
    elif isinstance(value, dict):
        # Keys sorted by their text: insertion order may differ between a run and its replay.
        hasher.update(f"dict {len(value)}:".encode())
        for key in sorted(value, key=repr):
            _feed(hasher, key)
            _feed(hasher, value[key])
    elif isinstance(value, (list, tuple, np.ndarray)):
        hasher.update(f"{type(value).__name__} {len(value)}:".encode())
        for item in value:
            _feed(hasher, item)
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        hasher.update(f"{type(value).__name__} {value!r};".encode())  # repr keeps every bit of a float
    else:
        # An object of unknown content: its default repr holds a memory address, which no replay repeats.
        hasher.update(f"object {type(value).__module__}.{type(value).__qualname__};".encode())
