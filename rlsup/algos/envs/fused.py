"""Fused games: a batch of games whose whole state is tensors on the learner's device, stepped at once, and their names.

`[env] source = "fused"` trains on one. A game comes from a factory, `factory(num_envs, seed, device)`, that
returns a FusedGame; `[env] id` names it: one of BUILT_IN (MinAtar through JAX), a name a package offers in the
entry-point group ENTRY_POINT_GROUP or registers in-process with register() (from a module of `[env] imports`),
or "module:factory" itself. Every game a trainer steps is wrapped in CheckedGame, so that a plugin's wrong
shapes or NaN rewards stop the run with a sentence, not a traceback deep in the learner.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Protocol

import numpy as np
import torch

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.faults import TRACEBACK_NOTE, EnvFault
from rlsup.algos.envs.observations import INTENSITY_MAX, NetworkError, layout_of
from rlsup.algos.envs.sources import (EnvDescription, EnvError, EnvImportError, env_key, env_of_key,
                                      import_or_explain)
from rlsup.formatting import one_line
from rlsup.spec import EnvSection

ENTRY_POINT_GROUP = "rlsup.fused_games"
# MinAtar as the paper played it (sticky actions 0.1, no step limit): -v0 all 6 actions, -v1 each game's minimal
# set, as gymnasium's MinAtar/ ids. Their module imports JAX, so they are reached by name only.
MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
BUILT_IN = {f"MinAtar/{game}-v{version}": f"rlsup.algos.envs.jax_minatar:{game.lower()}_v{version}"
            for game in MINATAR_GAMES for version in (0, 1)}

_registered: dict[str, str] = {}


@dataclass(frozen=True)
class FusedStep:
    """One step of every game of a batch; tensors on the game's device, indexed by game."""

    observations: torch.Tensor        # [N, *obs] what each game acts on next: a new episode's first where one ended
    rewards: torch.Tensor             # [N] float32
    terminations: torch.Tensor        # [N] bool: the game ended; nothing follows to bootstrap from
    truncations: torch.Tensor         # [N] bool: a time limit ended the episode, not the game
    final_observations: torch.Tensor  # [N, *obs] each game's last observation before any reset


class FusedGame(Protocol):
    """num_envs games on one device, auto-reset when an episode ends. state_dict() is the whole state, random
    keys and generators included, as tensors or arrays: load_state_dict() of it continues bit for bit."""

    num_envs: int
    device: torch.device
    observation_shape: tuple[int, ...]
    observation_dtype: torch.dtype
    actions: ActionSpace  # Discrete(n)

    def reset(self) -> torch.Tensor:
        """Start every game; the [N, *obs] first observations."""
        ...

    def step(self, actions: torch.Tensor) -> FusedStep:
        """actions: [N] int64 on the game's device."""
        ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def close(self) -> None: ...


FusedGameFactory = Callable[[int, int, torch.device], FusedGame]


def register(name: str, factory: str) -> None:
    """Offer a fused game under name: factory is "module:attribute" of a FusedGameFactory."""
    existing = _registered.get(name, BUILT_IN.get(name))
    if existing is not None and existing != factory:
        raise ValueError(f"fused game {name!r} is already registered ({existing})")
    _registered[name] = factory


def known_games() -> dict[str, str]:
    """Every named fused game: built-ins, then the entry points of ENTRY_POINT_GROUP, then register()'s."""
    games = dict(BUILT_IN)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        games.setdefault(entry.name, entry.value)
    games.update(_registered)
    return games


def factory_of(env: EnvSection) -> FusedGameFactory:
    """The factory [env] id names, after the modules [env] imports names (which may register() it)."""
    for module in env.imports:
        import_or_explain(module, f"cannot import {module!r} ([env] imports names it)", EnvImportError)
    games = known_games()
    reference = games.get(env.id) or (env.id if ":" in env.id else None)
    if reference is None:
        raise EnvError(f"no fused game is named {env.id!r}: source = \"fused\" takes one of "
                       f"{', '.join(map(repr, games))}, a name a plugin registers, or \"module:factory\"")
    module, _, attribute = reference.partition(":")
    import_or_explain(module, f"cannot load the fused game {env.id!r} from {reference}")
    factory = importlib.import_module(module)
    for part in attribute.split("."):
        factory = getattr(factory, part, None)
    if not callable(factory):
        raise EnvError(f"the fused game {env.id!r} names {reference}, which is not a factory of games")
    return factory


def make_fused_game(env: EnvSection, num_envs: int, seed: int, device: torch.device) -> CheckedGame:
    """The [env] section's fused game, num_envs of it on device, seeded with seed, its answers checked."""
    factory = factory_of(env)
    try:
        game = factory(num_envs, seed, device)
    except (EnvError, torch.cuda.OutOfMemoryError):
        raise
    except Exception as error:  # a plugin's factory may fail in any way
        raise EnvError(f"cannot make the fused game {env.id!r}: {type(error).__name__}: {one_line(str(error))}"
                       f"{TRACEBACK_NOTE}") from error
    return CheckedGame(env.id, game, num_envs, device, env.image_layout)


def describe_fused(env: EnvSection) -> EnvDescription:
    """What describe_env says of a fused game: two of it made on the CPU, reset and stepped once, then closed; once
    per process for each [env] section (a JAX game compiles its step when first made)."""
    return _describe(env_key(env))


@functools.lru_cache(maxsize=16)
def _describe(frozen: tuple) -> EnvDescription:
    env = env_of_key(frozen)
    game = make_fused_game(env, 2, 0, torch.device("cpu"))
    try:
        game.step(torch.zeros(2, dtype=torch.int64))
        return EnvDescription(game.layout, game.actions)
    finally:
        game.close()


class CheckedGame:
    """A FusedGame whose answers are checked, and its observations in the layout networks take, as TrainingEnv
    gives a gymnasium env's: images channels first, bool as uint8 0 or 255 (ObservationLayout.convert's rule).

    Shapes, dtypes and devices are checked on every call (no host round trip); finite rewards where the caller
    asks (check_rewards), once per update, where the learner waits anyway. observation_shape and
    observation_dtype are the layout's; the game's own are raw_shape and raw_dtype."""

    def __init__(self, game_id: str, game: FusedGame, num_envs: int, device: torch.device,
                 image_layout: str = "auto") -> None:
        self.game_id, self.game = game_id, game
        self.num_envs, self.device = num_envs, device
        self.actions = getattr(game, "actions", None)
        if not isinstance(self.actions, ActionSpace) or self.actions.continuous:
            raise EnvFault(f"the fused game {game_id!r} declares actions {self.actions!r}; a fused game has "
                           f"Discrete(n) actions (an rlsup ActionSpace)")
        self.raw_shape = tuple(int(side) for side in getattr(game, "observation_shape", ()))
        self.raw_dtype = getattr(game, "observation_dtype", None)
        if not isinstance(self.raw_dtype, torch.dtype):
            raise EnvFault(f"the fused game {game_id!r} declares observation_dtype {self.raw_dtype!r}, not a torch "
                           f"dtype")
        try:
            self.layout = layout_of(self.raw_shape, torch.empty(0, dtype=self.raw_dtype).numpy().dtype,
                                    stacked=False, image_layout=image_layout)
        except NetworkError as error:
            raise EnvError(f"the fused game {game_id!r} has observations of shape {self.raw_shape}: {error}") from None
        self.observation_shape = self.layout.shape
        self.observation_dtype = torch.from_numpy(np.zeros(0, self.layout.dtype)).dtype
        self._started = False

    def reset(self) -> torch.Tensor:
        observations = self._call("reset")
        self._check_tensor("reset", "observations", observations, (self.num_envs, *self.raw_shape), self.raw_dtype)
        self._started = True
        return self._in_layout(observations)

    def step(self, actions: torch.Tensor) -> FusedStep:
        if not self._started:
            self.reset()
        result = self._call("step", actions)
        if not isinstance(result, FusedStep):
            raise EnvFault(f"the fused game {self.game_id!r} returned a {type(result).__name__} from step, not a "
                           f"FusedStep")
        count, shape = self.num_envs, (self.num_envs, *self.raw_shape)
        for name, expected, dtype in (("observations", shape, self.raw_dtype),
                                      ("final_observations", shape, self.raw_dtype),
                                      ("rewards", (count,), torch.float32), ("terminations", (count,), torch.bool),
                                      ("truncations", (count,), torch.bool)):
            self._check_tensor("step", name, getattr(result, name), expected, dtype)
        return dataclasses.replace(result, observations=self._in_layout(result.observations),
                                   final_observations=self._in_layout(result.final_observations))

    def _in_layout(self, observations: torch.Tensor) -> torch.Tensor:
        """A batch of the game's observations as the network takes them: ObservationLayout.convert on a batch."""
        layout = self.layout
        if layout.kind == "vector":
            return observations.to(torch.float32)
        if layout.flat_image:
            observations = observations.unsqueeze(1)
        elif layout.channels_last:
            observations = observations.permute(0, 3, 1, 2)
        if observations.dtype == torch.bool:
            return (observations.to(torch.uint8) * INTENSITY_MAX).contiguous()
        return observations.to(self.observation_dtype).contiguous()

    def check_rewards(self, *sums: torch.Tensor) -> None:
        """Raise EnvFault if any of these tensors, sums of the game's rewards, is NaN or infinite (one wait for the
        device): a NaN or infinite reward leaves its episode's sum so until the episode ends."""
        if not all(bool(torch.isfinite(total).all()) for total in sums):
            raise EnvFault(f"the fused game {self.game_id!r} returned a NaN or infinite reward, which no network "
                           f"can learn from")

    def state_dict(self) -> dict:
        return self._call("state_dict")

    def load_state_dict(self, state: dict) -> None:
        self._call("load_state_dict", state)
        self._started = True

    def close(self) -> None:
        self._call("close")

    def _call(self, name: str, *arguments):
        try:
            return getattr(self.game, name)(*arguments)
        except (EnvError, torch.cuda.OutOfMemoryError):  # the worker's own sentences: a fault, or a held pause
            raise
        except Exception as error:  # a plugin may fail in any way: its own words, and the frames in worker.log
            raise EnvFault(f"the fused game {self.game_id!r} raised in {name}: {type(error).__name__}: "
                           f"{one_line(str(error))}{TRACEBACK_NOTE}") from error

    def _check_tensor(self, call: str, name: str, value, shape: tuple, dtype) -> None:
        if not isinstance(value, torch.Tensor):
            raise EnvFault(f"the fused game {self.game_id!r} returned {name} from {call} as a "
                           f"{type(value).__name__}, not a tensor")
        if tuple(value.shape) != shape or value.dtype != dtype or not same_device(value.device, self.device):
            raise EnvFault(f"the fused game {self.game_id!r} returned {name} from {call} of shape "
                           f"{tuple(value.shape)}, {value.dtype} on {value.device}; expected {shape}, {dtype} on "
                           f"{self.device}")


def same_device(first: torch.device, second: torch.device) -> bool:
    """Whether two devices are one: "cuda" (the current one) and "cuda:0" are, where the index is left open."""
    return first.type == second.type and (first.index is None or second.index is None or first.index == second.index)
