"""Agent steps/s with a policy forward per batch: rlsup's vectorisers vs the raw vector envs.

On an Atari game every backend steps N envs with the same preprocessing (frame skip 4 with max-pool,
84x84 grayscale, 4-frame stack, up to 30 no-ops, FIRE on reset, clipped rewards) and runs the Nature
CNN once per batch on the CPU to choose the N actions, as a DQN actor does. The raw ALE vector env
(C++ threads) is the reference; EnvPool joins where it is installed (pip install -e '.[bench]').
Any other id (MinAtar/Breakout-v1, LunarLander-v3) runs as the classic preset makes it, with the network
its observation gets, on rlsup's two vectorisers and Gymnasium's (the ALE and EnvPool columns show -); a
MinAtar id also on its fused game (`rlsup fused`, [env] source = "fused": gymnax's port, one jitted step a batch).
--random plays uniform random actions instead of the network: the envs' own rate.
"rlsup auto" is what a job gets by default ([env] vectoriser = "auto", resolved on this machine), and
auto/ALE the headline ratio.

    python bench/env_throughput.py [--game ALE/Pong-v5] [--envs 1 4 8] [--seconds 5] [--repeats 3] [--threads 2]
    python bench/env_throughput.py --game MinAtar/Breakout-v1 --envs 16 64 256 --backends rlsup "rlsup fused" --random

The result (bench/results_format.py) goes to --out, by default results/env-throughput-GAME.json.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Callable, NamedTuple

import numpy as np
import torch

import results_format  # bench/ beside this script
from rlsup.algos.nets import build_q_network
from rlsup.algos.envs.vectorise import env_seeds, make_vector_env
from rlsup.spec import EnvSection

# Batches stepped before the clock starts: resets and the first forward passes are not steady state.
WARM_UP_BATCHES = 20
SEED = 1

# A backend: (game, num_envs, threads) -> (reset, step, close), observations out as an [N, *obs] array.
Stepper = tuple[Callable[[], np.ndarray], Callable[[np.ndarray], np.ndarray], Callable[[], None]]


def env_settings(game: str, vectoriser: str = "serial") -> EnvSection:
    preset = "atari" if game.startswith("ALE/") else "classic"
    return EnvSection(id=game, preset=preset, clip_rewards=preset == "atari", vectoriser=vectoriser)


def rlsup_backend(vectoriser: str) -> Callable[[str, int, int], Stepper]:
    """rlsup's env layer as the trainers use it: make_vector_env over TrainingEnvs, in turn or in processes."""
    def build(game: str, count: int, threads: int) -> Stepper:
        vector = make_vector_env(env_settings(game, vectoriser), env_seeds(np.random.SeedSequence(SEED), count))
        return vector.reset, lambda actions: vector.step(actions).observations, vector.close
    return build


def ale_backend(game: str, count: int, threads: int) -> Stepper:
    from ale_py.vector_env import AtariVectorEnv

    if not game.startswith("ALE/"):
        raise NotApplicable

    vector = AtariVectorEnv(rom_name(game), count, num_threads=threads, repeat_action_probability=0.0,
                            frameskip=4, stack_num=4, img_height=84, img_width=84, grayscale=True,
                            noop_max=30, reward_clipping=True, episodic_life=False, use_fire_reset=True)
    return (lambda: vector.reset(seed=SEED)[0]), (lambda actions: vector.step(actions)[0]), vector.close


def envpool_backend(game: str, count: int, threads: int) -> Stepper:
    import envpool

    if not game.startswith("ALE/"):
        raise NotApplicable
    vector = envpool.make(f"{game.split('/')[-1]}", env_type="gymnasium", num_envs=count, batch_size=count,
                          num_threads=threads, seed=SEED, episodic_life=False, reward_clip=True,
                          repeat_action_probability=0.0, noop_max=30, use_fire_reset=True)
    return (lambda: vector.reset()[0]), (lambda actions: vector.step(actions)[0]), vector.close


def gymnasium_backend(asynchronous: bool) -> Callable[[str, int, int], Stepper]:
    def build(game: str, count: int, threads: int) -> Stepper:
        import gymnasium as gym

        functions = [lambda: atari_stack(game) if game.startswith("ALE/") else classic_stack(game)
                     for _ in range(count)]
        vector = gym.vector.AsyncVectorEnv(functions) if asynchronous else gym.vector.SyncVectorEnv(functions)
        return (lambda: vector.reset(seed=SEED)[0]), (lambda actions: vector.step(actions)[0]), vector.close
    return build


def classic_stack(game: str):
    """The env as rlsup's classic preset makes it (its observations in the env's own layout)."""
    from rlsup.algos.envs.sources import make_stack

    return make_stack(env_settings(game))


class NotApplicable(Exception):
    """A backend that cannot step this game (the ALE vector env and EnvPool step Atari games only)."""


def atari_stack(game: str):
    """The wrapper stack rlsup's atari preset builds, from Gymnasium's own wrappers."""
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    from rlsup.algos.envs.fire_reset import FireReset

    gym.register_envs(ale_py)
    env = gym.make(game, frameskip=1, repeat_action_probability=0.0, full_action_space=False,
                   obs_type="grayscale", disable_env_checker=True)
    env = FireReset(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True,
                                       scale_obs=False))
    return FrameStackObservation(env, 4, padding_type="reset")


def rom_name(game: str) -> str:
    """ALE/SpaceInvaders-v5 -> space_invaders, the ROM name the ALE vector env takes."""
    name = game.split("/")[-1].split("-")[0]
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def fused_backend(game: str, count: int, threads: int) -> Stepper:
    """rlsup's fused game on the CPU ([env] source = "fused", issue 53): the batch stepped by one jitted call, its
    observations shared with torch, as the one-process V-trace loop steps it."""
    if not game.startswith("MinAtar/"):
        raise NotApplicable(game)
    from rlsup.algos.envs.fused import make_fused_game

    games = make_fused_game(EnvSection(id=game, source="fused"), count, SEED, torch.device("cpu"))
    return (lambda: games.reset().numpy(), lambda actions: games.step(torch.from_numpy(actions)).observations.numpy(),
            games.close)


# Backends whose envs run in child processes, whose CPU time the efficiency table cannot see.
CHILD_PROCESSES = {"rlsup subp", "rlsup auto", "gym async"}

BACKENDS: dict[str, Callable[[str, int, int], Stepper]] = {
    "rlsup auto": rlsup_backend("auto"),  # what a job gets by default
    "rlsup": rlsup_backend("serial"),
    "rlsup subp": rlsup_backend("subprocess"),
    "ALE vector": ale_backend,
    "EnvPool": envpool_backend,
    "gym sync": gymnasium_backend(asynchronous=False),
    "gym async": gymnasium_backend(asynchronous=True),
    "rlsup fused": fused_backend,
}


class Measurement(NamedTuple):
    rate: float          # agent steps per wall-clock second
    cpu_per_step: float  # CPU seconds of this process (all its threads) per agent step


def steps_per_second(stepper: Stepper, policy: Policy, count: int, seconds: float) -> Measurement:
    reset, step, close = stepper
    observations = reset()
    for _ in range(WARM_UP_BATCHES):
        observations = step(policy(observations))
    began, began_cpu, batches = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - began < seconds:
        observations = step(policy(observations))
        batches += 1
    measurement = Measurement(batches * count / (time.perf_counter() - began),
                              (time.process_time() - began_cpu) / (batches * count))
    close()
    return measurement


class Policy:
    """The Q-network's greedy actions for a batch, whatever layout the backend hands images out in; with random,
    uniform actions instead (the envs' own rate, no network)."""

    def __init__(self, observation_shape: tuple, num_actions: int, random: bool = False) -> None:
        self.network = build_q_network(observation_shape, num_actions, [256]).eval()
        self.observation_shape = tuple(observation_shape)
        self.num_actions = num_actions
        self.random = np.random.default_rng(SEED) if random else None

    def warm_up(self, count: int) -> None:
        """A few forwards at this batch size first, so that torch's one-time set-up for it is charged to no
        backend (else the first in a round pays it)."""
        for _ in range(WARM_UP_BATCHES):
            self(np.zeros((count, *self.observation_shape), np.uint8))

    @torch.no_grad()
    def __call__(self, observations: np.ndarray) -> np.ndarray:
        if self.random is not None:
            return self.random.integers(self.num_actions, size=len(observations))
        # Gymnasium's vectors give images as the env makes them (MinAtar: HWC bools); rlsup's are CHW.
        observations = np.asarray(observations)
        if observations.shape[1:] != self.observation_shape:
            observations = np.moveaxis(observations, -1, 1)
        batch = np.ascontiguousarray(observations, dtype=np.uint8 if observations.dtype == bool else None)
        return self.network(torch.from_numpy(batch)).argmax(dim=1).numpy()


def measure(name: str, game: str, count: int, arguments: argparse.Namespace,
            policy: Policy) -> Measurement | None:
    try:
        stepper = BACKENDS[name](game, count, min(count, arguments.threads))
    except (ImportError, NotApplicable):
        return None
    return steps_per_second(stepper, policy, count, arguments.seconds)


def medians(arguments: argparse.Namespace, count: int, policy: Policy) -> dict[str, Measurement | None]:
    """Each backend's medians over --repeats rounds, the backends taking turns within a round, so that
    load from other processes on a shared machine falls on all of them alike."""
    samples: dict[str, list[Measurement]] = {name: [] for name in arguments.backends}
    policy.warm_up(count)
    for _ in range(arguments.repeats):
        for name in arguments.backends:
            measurement = measure(name, arguments.game, count, arguments, policy)
            if measurement is not None:
                samples[name].append(measurement)
    return {name: Measurement(*np.median(np.array(taken), axis=0)) if taken else None
            for name, taken in samples.items()}


def ratio(values: dict, numerator: str, denominator: str, width: int) -> str:
    if values.get(numerator) and values.get(denominator):
        return f"{values[numerator] / values[denominator]:>{width}.2f}"
    return f"{'-':>{width}}"


def row(count: int, values: dict[str, float | None], digits: int) -> str:
    cells = "".join(f"{value:>12.{digits}f}" if value is not None else f"{'-':>12}" for value in values.values())
    return f"{count:>3}{cells}{''.join(ratio(values, top, bottom, 12) for _, top, bottom in RATIO_COLUMNS)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per measurement")
    parser.add_argument("--repeats", type=int, default=1, help="rounds per N; each backend's median is shown")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="env threads of the ALE vector env and EnvPool")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--random", action="store_true", help="uniform random actions: the envs' own rate")
    results_format.add_out_argument(parser, "results/env-throughput-GAME.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/env_throughput.py")
    torch.set_num_threads(1)  # the forward of every backend alike: one thread, the envs get the rest
    probe = make_vector_env(env_settings(arguments.game), [SEED])
    policy = Policy(probe.observation_shape, probe.num_actions, random=arguments.random)
    probe.close()
    acting = "uniform random actions" if arguments.random else "Q-network forward per batch (1 torch thread)"
    print(f"{arguments.game}: agent steps/s, {acting}, env threads or "
          f"processes min(N, {arguments.threads}), {arguments.seconds:g} s each, median of {arguments.repeats}, "
          f"{os.cpu_count()} CPUs")
    header = f"{'N':>3}" + "".join(f"{name:>12}" for name in arguments.backends) + "".join(
        f"{label:>12}" for label, _, _ in RATIO_COLUMNS)
    print(header)
    rates, efficiency = {}, {}
    for count in arguments.envs:
        measured = medians(arguments, count, policy)
        rates[count] = {name: found and found.rate for name, found in measured.items()}
        print(row(count, rates[count], 0), flush=True)
        # Steps per CPU second of this process: steady under other load, and blind to work in child processes.
        efficiency[count] = {name: None if found is None or name in CHILD_PROCESSES else 1 / found.cpu_per_step
                             for name, found in measured.items()}
    print("budget: rlsup auto (a job's default) / ALE vector >= 0.9; rlsup is the serial vectoriser")
    print("agent steps per CPU second of this process (its threads included; backends with child processes: -)")
    print(header)
    for count, values in efficiency.items():
        print(row(count, values, 0))
    write_result(arguments, run, rates, efficiency)
    return 0


# The backends' names on the result's page, and the ratios the printed table ends with.
SHOWN = {"rlsup auto": "rlsup auto", "rlsup": "rlsup serial", "rlsup subp": "rlsup subprocess"}
RATIOS = (("rlsup auto", "ALE vector"), ("rlsup", "ALE vector"), ("rlsup subp", "ALE vector"), ("rlsup subp", "rlsup"),
          ("rlsup auto", "rlsup"), ("rlsup fused", "rlsup"))
RATIO_COLUMNS = [(f"{top.removeprefix('rlsup ') if top != 'rlsup' else 'rlsup'}/{bottom.split()[0]}", top, bottom)
                 for top, bottom in RATIOS]


def shown(name: str) -> str:
    return SHOWN.get(name, name)


def quotient(values: dict, numerator: str, denominator: str) -> float | None:
    return values[numerator] / values[denominator] if values.get(numerator) and values.get(denominator) else None


def write_result(arguments: argparse.Namespace, run: dict, rates: dict, efficiency: dict) -> None:
    """Both printed tables as the result: agent steps/s with the ratios, and steps per CPU second."""
    names = list(arguments.backends)
    ratios = [(top, bottom) for top, bottom in RATIOS if top in names and bottom in names]
    column = results_format.column
    columns = [*(column(shown(name), "steps/s", 0) for name in names),
               *(column(f"{shown(top).removeprefix('rlsup ')} / {shown(bottom).removeprefix('rlsup ')}", "x", 2)
                 for top, bottom in ratios)]
    acting = "Uniform random actions" if arguments.random else "A Q-network forward per batch (1 torch thread)"
    said = (f"{acting}; env threads or processes min(N, {arguments.threads}); "
            f"{arguments.seconds:g} s a measurement, the median of {arguments.repeats}; {os.cpu_count()} CPUs.")
    tables = [results_format.measurement("Agent steps/s", "envs (N)", columns, {
        str(count): [*(values[name] for name in names), *(quotient(values, *ratio) for ratio in ratios)]
        for count, values in rates.items()}, said)]
    tables.append(results_format.measurement(
        "Agent steps per CPU second of this process", "envs (N)", [column(shown(name), "steps/s", 0) for name in names],
        {str(count): [values[name] for name in names] for count, values in efficiency.items()},
        "Its threads included; blind to work in child processes, so backends with env processes show none."))
    auto = [quotient(values, "rlsup auto", "ALE vector") for values in rates.values()]
    known = [value for value in auto if value is not None]
    finding = (f"rlsup auto (a job's default) made {results_format.span(known)} times the ALE vector env's agent "
               f"steps/s at N = {', '.join(map(str, rates))}." if known else None)
    results_format.write_figures(arguments, run, f"env-throughput-{results_format.game_word(arguments.game)}",
                                 f"Agent steps/s on {arguments.game}: rlsup's vectorisers against the raw vector envs",
                                 tables, finding)


if __name__ == "__main__":
    sys.exit(main())
