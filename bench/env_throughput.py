"""Agent steps/s on an Atari game with a policy forward per batch: rlsup's vectoriser vs the raw vector envs.

Every backend steps N envs of the same game with the same preprocessing (frame skip 4 with max-pool,
84x84 grayscale, 4-frame stack, up to 30 no-ops, FIRE on reset, clipped rewards) and runs the Nature
CNN once per batch on the CPU to choose the N actions, as a DQN actor does. The raw ALE vector env
(C++ threads) is the reference; EnvPool joins where it is installed (pip install -e '.[bench]').

    python bench/env_throughput.py [--game ALE/Pong-v5] [--envs 1 4 8] [--seconds 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from typing import Callable

import numpy as np
import torch

from rlsup.algos.nets import build_q_network
from rlsup.algos.vector import env_seeds, make_vector_env
from rlsup.spec import EnvSection

# Batches stepped before the clock starts: resets and the first forward passes are not steady state.
WARM_UP_BATCHES = 20
SEED = 1

# A backend: (num_envs, threads) -> (reset, step), observations out as a [N, 4, 84, 84] uint8 array.
Stepper = tuple[Callable[[], np.ndarray], Callable[[np.ndarray], np.ndarray]]


def rlsup_backend(game: str, count: int, threads: int) -> Stepper:
    """rlsup's env layer as the trainers use it: make_vector_env over TrainingEnvs."""
    settings = EnvSection(id=game, preset="atari", clip_rewards=True)
    vector = make_vector_env(settings, env_seeds(np.random.SeedSequence(SEED), count))
    return vector.reset, lambda actions: vector.step(actions).observations


def ale_backend(game: str, count: int, threads: int) -> Stepper:
    from ale_py.vector_env import AtariVectorEnv

    vector = AtariVectorEnv(rom_name(game), count, num_threads=threads, repeat_action_probability=0.0,
                            frameskip=4, stack_num=4, img_height=84, img_width=84, grayscale=True,
                            noop_max=30, reward_clipping=True, episodic_life=False, use_fire_reset=True)
    return (lambda: vector.reset(seed=SEED)[0]), (lambda actions: vector.step(actions)[0])


def envpool_backend(game: str, count: int, threads: int) -> Stepper:
    import envpool

    vector = envpool.make(f"{game.split('/')[-1]}", env_type="gymnasium", num_envs=count, batch_size=count,
                          num_threads=threads, seed=SEED, episodic_life=False, reward_clip=True,
                          repeat_action_probability=0.0, noop_max=30, use_fire_reset=True)
    return (lambda: vector.reset()[0]), (lambda actions: vector.step(actions)[0])


def gymnasium_backend(asynchronous: bool) -> Callable[[str, int, int], Stepper]:
    def build(game: str, count: int, threads: int) -> Stepper:
        import gymnasium as gym

        functions = [lambda: atari_stack(game) for _ in range(count)]
        vector = gym.vector.AsyncVectorEnv(functions) if asynchronous else gym.vector.SyncVectorEnv(functions)
        return (lambda: vector.reset(seed=SEED)[0]), (lambda actions: vector.step(actions)[0])
    return build


def atari_stack(game: str):
    """The wrapper stack rlsup's atari preset builds, from Gymnasium's own wrappers."""
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    from rlsup.algos.fire_reset import FireReset

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


BACKENDS: dict[str, Callable[[str, int, int], Stepper]] = {
    "rlsup": rlsup_backend,
    "ALE vector": ale_backend,
    "EnvPool": envpool_backend,
    "gym sync": gymnasium_backend(asynchronous=False),
    "gym async": gymnasium_backend(asynchronous=True),
}


def steps_per_second(stepper: Stepper, policy: torch.nn.Module, count: int, seconds: float) -> float:
    reset, step = stepper
    observations = reset()
    for _ in range(WARM_UP_BATCHES):
        observations = step(act(policy, observations))
    began, batches = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        observations = step(act(policy, observations))
        batches += 1
    return batches * count / (time.perf_counter() - began)


@torch.no_grad()
def act(policy: torch.nn.Module, observations: np.ndarray) -> np.ndarray:
    return policy(torch.from_numpy(np.ascontiguousarray(observations))).argmax(dim=1).numpy()


def measure(name: str, game: str, count: int, arguments: argparse.Namespace,
            policy: torch.nn.Module) -> float | None:
    try:
        stepper = BACKENDS[name](game, count, min(count, arguments.threads))
    except ImportError:
        return None
    return steps_per_second(stepper, policy, count, arguments.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per measurement")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="env threads of the ALE vector env and EnvPool")
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    arguments = parser.parse_args()
    torch.set_num_threads(1)  # the forward of every backend alike: one thread, the envs get the rest
    probe = make_vector_env(EnvSection(id=arguments.game, preset="atari"), [SEED])
    policy = build_q_network(probe.observation_shape, probe.num_actions, []).eval()
    probe.close()
    print(f"{arguments.game}: agent steps/s, Nature CNN forward per batch (1 torch thread), "
          f"env threads min(N, {arguments.threads}), {arguments.seconds:g} s each, {os.cpu_count()} CPUs")
    print(f"{'N':>3}" + "".join(f"{name:>12}" for name in arguments.backends) + f"{'rlsup/ALE':>11}")
    for count in arguments.envs:
        rates = {name: measure(name, arguments.game, count, arguments, policy) for name in arguments.backends}
        cells = "".join(f"{rate:>12.0f}" if rate is not None else f"{'-':>12}" for rate in rates.values())
        ratio = (f"{rates['rlsup'] / rates['ALE vector']:>11.2f}"
                 if rates.get("rlsup") and rates.get("ALE vector") else f"{'-':>11}")
        print(f"{count:>3}{cells}{ratio}", flush=True)
    print("budget: rlsup / ALE vector >= 0.9")
    return 0


if __name__ == "__main__":
    sys.exit(main())
