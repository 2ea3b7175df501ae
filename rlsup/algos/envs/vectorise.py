"""The vectoriser factory: which vectoriser steps a job's envs, their seeds, and the vector made with them."""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from rlsup.algos.envs.memory import make_envs
from rlsup.algos.envs.subprocess import SubprocessVectorEnv
from rlsup.algos.envs.vector import SerialVectorEnv, VectorEnv
from rlsup.hardware import idle_cpus
from rlsup.spec import EnvSection

log = logging.getLogger("rlsup.envs")


def env_seeds(sequence: np.random.SeedSequence, count: int) -> list[int]:
    """One first-reset seed per env, spawned from a job's seed sequence (the first `count` children)."""
    return [int(child.generate_state(1)[0]) for child in sequence.spawn(count)]


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
    if env.source == "fused":
        return fused_vector(env, seeds)
    if cpus is None:
        cpus = spare_cpus(sharers) if counts_cpus(env, len(seeds)) else 1
    choice = choose_vectoriser(env, len(seeds), cpus)
    log.info("[env] vectoriser %s: %s", env.vectoriser, choice.reason)
    if choice.name == "subprocess":
        return SubprocessVectorEnv(env, seeds, choice.slices)
    return SerialVectorEnv(make_envs(env, seeds))


def fused_vector(env: EnvSection, seeds: list[int]) -> VectorEnv:
    """A fused game of len(seeds) games, seeded with the first seed: a game that is its own vectoriser. It steps on
    the CPU, where the replay keeps its transitions (on a GPU each step would be a round trip to the host)."""
    import torch  # a fused game's tensors; imported here, as the gymnasium vectorisers need none

    from rlsup.algos.envs.fused import make_fused_game
    from rlsup.algos.envs.fused_vector import FusedVectorEnv

    log.info("[env] vectoriser: the fused game %s steps its %d games itself", env.id, len(seeds))
    return FusedVectorEnv(make_fused_game(env, len(seeds), seeds[0], torch.device("cpu")), env.clip_rewards)


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
