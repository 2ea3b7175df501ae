"""Vectorisers: N training envs stepped as one batch, so the policy runs once per batch, each env's state captured."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rlsup.algos.envs.capture import EnvRestart, load_env_states
from rlsup.algos.envs.memory import make_envs
from rlsup.algos.envs.training import EpisodeResult, TrainingEnv
from rlsup.hardware import idle_cpus
from rlsup.spec import EnvSection

log = logging.getLogger("rlsup.envs")


@dataclass(frozen=True)
class VectorStep:
    """One agent step of every env in a vector; arrays are indexed by env."""

    observations: np.ndarray                   # [N, *obs] what each env acts on next: a new episode's first if done
    rewards: np.ndarray                        # [N] float64 learning rewards (sign-clipped when clip_rewards)
    terminals: np.ndarray                      # [N] bool: cut the bootstrap (game over, or a lost life)
    dones: np.ndarray                          # [N] bool: the episode ended and the env was reset
    truncated: np.ndarray                      # [N] bool: ended by a time limit, not by the game
    final_observations: dict[int, np.ndarray]  # the last observation of each env whose episode ended
    episodes: dict[int, EpisodeResult]         # each finished episode, by env


class VectorEnv(Protocol):
    """N envs of one [env] section, stepped together and auto-reset when an episode ends.

    The checkpoint contract is per env: state_dict() maps each env's index (as a string) to its own
    TrainingEnv state, so a vector resumes bit for bit whatever steps it, and a checkpoint keeps the
    layout it had when trainers held a plain list of envs.
    """

    num_envs: int
    observation_shape: tuple
    observation_dtype: np.dtype
    frame_shape: tuple
    stack_size: int
    num_actions: int

    def reset(self) -> np.ndarray:
        """Start every env's first episode; the [N, *obs] observations."""
        ...

    def step(self, actions: np.ndarray) -> VectorStep:
        ...

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of one env's observation, as the replay stores it."""
        ...

    def state_dict(self) -> dict:
        ...

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        """Restore every env; those whose saved episode did not replay exactly have started a fresh one,
        and come back with its first observation (see env_capture.load_env_states)."""
        ...

    def close(self) -> None:
        ...


def check_env_count(state: dict, num_envs: int) -> None:
    """Refuse a saved vector state of another number of envs."""
    if len(state) != num_envs:
        raise ValueError(f"the saved state holds {len(state)} envs, this vector steps {num_envs}")


def env_seeds(sequence: np.random.SeedSequence, count: int) -> list[int]:
    """One first-reset seed per env, spawned from a job's seed sequence (the first `count` children)."""
    return [int(child.generate_state(1)[0]) for child in sequence.spawn(count)]


class SerialVectorEnv:
    """The envs stepped one after another in this process: exact for every env rlsup can capture.

    Envs are independent (each draws from its own generators), so stepping them all before any
    reset gives each the same trajectory as stepping and resetting them one at a time.
    """

    def __init__(self, envs: list[TrainingEnv], first_index: int = 0) -> None:
        """first_index: the number of the first env in state_dict keys, where these envs are a slice of a
        larger vector (the subprocess vectoriser's)."""
        if not envs:
            raise ValueError("a vector needs at least one env")
        self.envs = envs
        self.first_index = first_index
        first = envs[0]
        self.num_envs = len(envs)
        self.observation_shape = first.observation_shape
        self.observation_dtype = first.observation_dtype
        self.frame_shape = first.frame_shape
        self.stack_size = first.stack_size
        self.num_actions = first.num_actions

    def reset(self) -> np.ndarray:
        return np.stack([env.reset() for env in self.envs])

    def step(self, actions: np.ndarray) -> VectorStep:
        count = self.num_envs
        observations = []
        rewards = np.zeros(count, np.float64)
        terminals, dones, truncated = (np.zeros(count, bool) for _ in range(3))
        final_observations, episodes = {}, {}
        for index, (env, action) in enumerate(zip(self.envs, actions)):
            result = env.step(int(action))
            rewards[index], terminals[index] = result.reward, result.terminal
            dones[index], truncated[index] = result.done, result.truncated
            if result.done:
                final_observations[index] = result.observation
                episodes[index] = result.episode
                observations.append(env.reset())
            else:
                observations.append(result.observation)
        return VectorStep(np.stack(observations), rewards, terminals, dones, truncated, final_observations, episodes)

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        return self.envs[0].newest_frame(observation)

    def state_dict(self) -> dict:
        return {str(index): env.state_dict() for index, env in enumerate(self.envs, start=self.first_index)}

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        check_env_count(state, self.num_envs)
        return load_env_states(self.envs, state, self.first_index)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_vector_env(env: EnvSection, seeds: list[int], cpus: int | None = None, sharers: int = 1) -> VectorEnv:
    """One env per seed, stepped as a batch by the vectoriser [env] vectoriser names (see choose_vectoriser);
    cpus: the CPUs this vector may count on (default: spare_cpus(sharers), read only where the choice
    depends on it; V-trace's actors share them).

    Both vectorisers resume exactly and give the same trajectory: each env is a TrainingEnv whose state
    is captured on its own. The ALE vector env (ale-py 0.12: reset, send and recv, no per-env cloneState)
    and EnvPool cannot hand out one env's state, and they autoreset with unrecorded seeds, so an action
    replay would have to start from the first reset; they also preprocess frames in C++, so their runs
    would differ from today's. bench/env_throughput.py measures what each would gain.
    """
    if cpus is None:
        cpus = spare_cpus(sharers) if counts_cpus(env, len(seeds)) else 1
    choice = choose_vectoriser(env, len(seeds), cpus)
    log.info("[env] vectoriser %s: %s", env.vectoriser, choice.reason)
    if choice.name == "subprocess":
        from rlsup.algos.envs.subprocess import SubprocessVectorEnv  # it imports this module

        return SubprocessVectorEnv(env, seeds, choice.slices)
    return SerialVectorEnv(make_envs(env, seeds))


@dataclass(frozen=True)
class VectoriserChoice:
    """What make_vector_env steps a vector with, and why (the sentence worker.log shows)."""

    name: str           # "serial" or "subprocess"
    slices: int | None  # subprocess: how many slices (None: one per usable CPU)
    reason: str


# Envs per slice below which "auto" keeps a vector serial. Measured with bench/env_throughput.py on Pong
# (2 x86-64 cores, the second idle): two slices of 2 envs stepped 1.20x the serial rate (1874 against 1562
# agent steps/s), two of 1 only 1.06x, as each slice's batch pays a round trip to its process beside ~330 us
# of CPU per env step. With the second core busy, slices of 2 lose (0.77-0.88x): hence spare_cpus.
AUTO_ENVS_PER_SLICE = 2


def counts_cpus(env: EnvSection, num_envs: int) -> bool:
    """Whether choose_vectoriser's answer depends on the spare CPUs, which spare_cpus samples for 0.1 s."""
    return env.vectoriser == "auto" and env.preset == "atari" and num_envs >= 2 * AUTO_ENVS_PER_SLICE


def choose_vectoriser(env: EnvSection, num_envs: int, cpus: int) -> VectoriserChoice:
    """[env] vectoriser, with "auto" resolved by rule: subprocess for ALE games (the atari preset, ~330 us of
    CPU per agent step) when the envs fill at least two slices of AUTO_ENVS_PER_SLICE on as many spare CPUs;
    serial otherwise, as for MinAtar and classic control, whose steps cost less than a round trip to a
    process. Trajectories are the same either way, so the choice may differ between machines across a resume."""
    if env.vectoriser != "auto":
        return VectoriserChoice(env.vectoriser, None, f"{env.vectoriser}, as the job says")
    if env.preset != "atari":
        return VectoriserChoice("serial", None, f"serial, as {env.id} steps faster than a round trip to a process")
    slices = min(cpus, num_envs // AUTO_ENVS_PER_SLICE)
    if slices < 2:
        return VectoriserChoice("serial", None, f"serial, as {num_envs} envs on {cpus} spare CPUs do not fill two "
                                                f"slices of {AUTO_ENVS_PER_SLICE}")
    return VectoriserChoice("subprocess", slices, f"subprocess, {num_envs} envs in {slices} slices on {cpus} "
                                                  f"spare CPUs")


def spare_cpus(sharers: int = 1) -> int:
    """The CPUs a vector can count on: those the machine leaves idle (sampled while this process sleeps, so
    its own core counts), split among the vectors made side by side (V-trace actors). On a machine whose
    cores other work keeps busy, env processes only wait for a core: Pong at 8 envs then stepped at 0.76
    times the serial rate (bench/env_throughput.py, 2 cores under a load of 3.6)."""
    return max(1, math.floor(idle_cpus() + 0.5) // sharers)
