"""A batch of JAX games as a FusedGame: one jitted step for every game, tensors handed to torch by DLPack, no copy.

A game is given as gymnax's pair of pure functions, reset_env(key, params) and step_env(key, state, action,
params), for one game; JaxGames steps num_envs of them with jax.vmap on the JAX device that is torch's, resets
those whose episodes ended, adds sticky actions and a time limit where asked, and keeps its random key, so the
whole batch is its state_dict(): arrays a checkpoint holds, checked against a fresh batch when loaded.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.fused import FusedStep
from rlsup.algos.envs.sources import EnvError
from rlsup.formatting import one_line

# A JAX array seen through numpy is read-only, and torch warns of it once; nothing here writes to one.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", category=UserWarning)
# JAX takes 75% of a GPU's memory when first used unless told not to: torch's learner shares that GPU.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

JAX_EXTRA = "pip install 'rlsup[jax]'"


def import_jax():
    """jax, or EnvError naming the extra that installs it; compiled steps cached across processes (cache_folder)."""
    try:
        import jax
    except ImportError:
        raise EnvError(f"fused MinAtar games run on JAX, which is not installed: {JAX_EXTRA}") from None
    if jax.config.jax_compilation_cache_dir is None:
        # Every process that makes a game compiles its step (validate, the worker, each resume): from the cache,
        # Seaquest's took 2.2 s where compiling took 13.4 (64 games, this 2-core EPYC under load).
        jax.config.update("jax_compilation_cache_dir", str(cache_folder()))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    return jax


def cache_folder() -> Path:
    """Where JAX keeps compiled game steps: $XDG_CACHE_HOME/rlsup/jax (~/.cache/rlsup/jax), the user's own."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlsup" / "jax"


def jax_device_of(device: torch.device):
    """The JAX device that is torch's device: the CPU, or the same CUDA GPU; EnvError where JAX has none."""
    jax = import_jax()
    if device.type == "cpu":
        return jax.devices("cpu")[0]
    if device.type != "cuda":
        raise EnvError(f"JAX games run on a CPU or a CUDA GPU, and the job's device is {device}")
    try:
        gpus = jax.devices("cuda")
    except RuntimeError:
        raise EnvError(f"the job trains on {device}, and this JAX has no CUDA backend: install JAX's CUDA build "
                       f"for torch's CUDA {torch.version.cuda} (pip install 'jax[cuda12]' or 'jax[cuda13]')") from None
    index = torch.cuda.current_device() if device.index is None else device.index
    if index >= len(gpus):
        raise EnvError(f"the job trains on {device}, and JAX sees {len(gpus)} CUDA GPU(s)")
    return gpus[index]


def run_on_device(function: Callable, *arguments):
    """function(*arguments), with JAX's out of memory raised as torch's, which the worker turns into the pause a
    CUDA out of memory is (held until a client resumes the job), whichever library ran short."""
    try:
        return function(*arguments)
    except Exception as error:  # JAX's runtime error class has moved between versions: its status names the fault
        if "RESOURCE_EXHAUSTED" in str(error):
            raise torch.cuda.OutOfMemoryError(f"JAX: {one_line(str(error))}") from error
        raise


@dataclass(frozen=True)
class JaxGameRules:
    """One game as pure JAX functions, and how rlsup plays it."""

    reset: Callable   # reset_env(key, params) -> (observation, state)
    step: Callable    # step_env(key, state, action, params) -> (observation, state, reward, terminated, info)
    params: Any
    actions: ActionSpace
    sticky_actions: float = 0.0  # the chance that the previous action is played again instead of the chosen one
    max_episode_steps: int = 0   # 0: no time limit
    ends: Callable | None = None  # ends(state) -> bool: a game's own end that step_env does not report


class JaxGames:
    """num_envs JaxGameRules games on torch's device (see the module docstring)."""

    def __init__(self, rules: JaxGameRules, num_envs: int, seed: int, device: torch.device):
        self.jax = jax = import_jax()
        self.rules, self.num_envs, self.device = rules, num_envs, torch.device(device)
        self.jax_device = jax_device_of(self.device)
        self.actions = rules.actions
        self.truncates = rules.max_episode_steps > 0
        # jit computes where its inputs are: the key put on the device here, and torch's actions (DLPack).
        self._reset_all = jax.jit(self._build_reset())
        self._step_all = jax.jit(self._build_step())
        self.carry, first = run_on_device(self._reset_all, jax.device_put(jax.random.PRNGKey(seed), self.jax_device))
        self._first = first
        self.observation_shape = tuple(first.shape[1:])
        self.observation_dtype = torch.bool

    def _build_reset(self) -> Callable:
        jax, rules, count = self.jax, self.rules, self.num_envs

        def reset(key):
            key, games_key = jax.random.split(key)
            observations, states = jax.vmap(rules.reset, in_axes=(0, None))(jax.random.split(games_key, count),
                                                                             rules.params)
            # A reset may leave a leaf weakly typed (Freeway's position, a Python int), which the step's output is
            # not: the step would compile a second time, after its first call (5 s of a loaded CPU).
            states = jax.tree.map(lambda leaf: jax.lax.convert_element_type(leaf, leaf.dtype), states)
            zeros = jax.numpy.zeros(count, jax.numpy.int32)
            return (key, states, zeros, zeros), observations.astype(jax.numpy.uint8)

        return reset

    def _build_step(self) -> Callable:
        jax, rules, count = self.jax, self.rules, self.num_envs
        numpy = jax.numpy

        def step(carry, actions):
            key, states, previous, times = carry
            key, sticky_key, step_key, reset_key = jax.random.split(key, 4)
            # The previous action played again with probability sticky_actions, as MinAtar's Environment.act.
            repeat = jax.random.uniform(sticky_key, (count,)) < rules.sticky_actions
            played = numpy.where(repeat, previous, actions)
            observations, stepped, rewards, terminated, _ = jax.vmap(rules.step, in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, count), states, played, rules.params)
            if rules.ends is not None:
                terminated = terminated | jax.vmap(rules.ends)(stepped)
            times = times + 1
            limit = rules.max_episode_steps
            truncated = (times >= limit) & ~terminated if limit else numpy.zeros(count, bool)
            ended = terminated | truncated
            fresh_observations, fresh = jax.vmap(rules.reset, in_axes=(0, None))(jax.random.split(reset_key, count),
                                                                                 rules.params)

            def chosen(new, old):
                return numpy.where(ended.reshape((count,) + (1,) * (old.ndim - 1)), new, old)

            states = jax.tree.map(chosen, fresh, stepped)
            next_observations = chosen(fresh_observations, observations)
            carry = (key, states, played, numpy.where(ended, 0, times))
            as_bytes = numpy.uint8
            return carry, (next_observations.astype(as_bytes), observations.astype(as_bytes),
                           rewards.astype(numpy.float32), terminated.astype(as_bytes), truncated.astype(as_bytes))

        return step

    # -- FusedGame --------------------------------------------------------------------------

    def reset(self) -> torch.Tensor:
        return self._torch(self._first).view(torch.bool)

    def step(self, actions: torch.Tensor) -> FusedStep:
        self.carry, (observations, finals, rewards, terminated, truncated) = run_on_device(
            self._step_all, self.carry, self._jax(actions))
        return FusedStep(self._torch(observations).view(torch.bool), self._torch(rewards),
                         self._torch(terminated).view(torch.bool), self._torch(truncated).view(torch.bool),
                         self._torch(finals).view(torch.bool))

    def _jax(self, actions: torch.Tensor):
        """Torch's actions as a JAX array on the same device, int32 (JAX's integers without x64)."""
        played = actions.to(torch.int32)
        if self.device.type == "cpu":
            # A numpy array, which the jitted step takes as it is: 141 us a step with the call, against 177 through
            # jnp.asarray and 250 through DLPack (16 envs of Breakout on this 2-core EPYC).
            return played.numpy()
        return self.jax.dlpack.from_dlpack(played)

    def _torch(self, array) -> torch.Tensor:
        """A JAX array as a tensor on torch's device, sharing its memory: through numpy on the CPU (2 us against
        DLPack's 8), by DLPack on a GPU. JAX never writes an array it has handed out."""
        if self.device.type == "cpu":
            return torch.from_numpy(np.asarray(array))
        return torch.from_dlpack(array)

    def device_memory_bytes(self) -> int | None:
        """The most JAX's own allocator has held on the games' GPU, which torch's does not count; None on a CPU,
        where JAX keeps no count."""
        stats = self.jax_device.memory_stats() if self.device.type == "cuda" else None
        return int(stats["peak_bytes_in_use"]) if stats and "peak_bytes_in_use" in stats else None

    def state_dict(self) -> dict:
        """The key, the previous actions, the episode times and every leaf of the games' states, as numpy arrays."""
        key, states, previous, times = self.carry
        leaves = {self.jax.tree_util.keystr(path): np.asarray(leaf)
                  for path, leaf in self.jax.tree_util.tree_flatten_with_path(states)[0]}
        return {"key": np.asarray(key), "previous_actions": np.asarray(previous), "episode_times": np.asarray(times),
                "states": leaves}

    def load_state_dict(self, state: dict) -> None:
        """Restore a state_dict(), each array checked against this batch's own (a stranger's may hold anything)."""
        jax = self.jax
        key, states, previous, times = self.carry
        paths_and_leaves, structure = jax.tree_util.tree_flatten_with_path(states)
        saved_states = state["states"]
        names = [jax.tree_util.keystr(path) for path, _ in paths_and_leaves]
        if sorted(saved_states) != sorted(names):
            raise ValueError(f"the checkpoint's game state has the parts {sorted(saved_states)}, this game "
                             f"{sorted(names)}")
        restored = [self._checked(saved_states[name], leaf, name) for name, (_, leaf) in zip(names, paths_and_leaves)]
        self.carry = (self._checked(state["key"], key, "key"),
                      jax.tree_util.tree_unflatten(structure, restored),
                      self._checked(state["previous_actions"], previous, "previous_actions"),
                      self._checked(state["episode_times"], times, "episode_times"))

    def _checked(self, saved, current, name: str):
        array = np.asarray(saved)
        if array.shape != tuple(current.shape) or array.dtype != np.dtype(current.dtype):
            raise ValueError(f"the checkpoint's game state {name} has shape {array.shape} and dtype {array.dtype}, "
                             f"this game's {tuple(current.shape)} and {np.dtype(current.dtype)}")
        return self.jax.device_put(array, self.jax_device)

    def close(self) -> None:
        pass
