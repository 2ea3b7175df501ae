"""Greedy evaluation on environments and random streams of its own."""
from __future__ import annotations

from typing import Callable

import numpy as np

from rlsup.algos.contract import Policy
from rlsup.algos.envs.training import make_env
from rlsup.spec import EnvSection


def evaluation_seed(job_seed: int, step: int) -> int:
    """A seed for the evaluation at step that no training stream shares."""
    return int(np.random.SeedSequence([job_seed, 0xE7A1, step]).generate_state(1)[0])


def play_episodes(policy: Policy, env_settings: EnvSection, *, seed: int, episodes: int,
                  epsilon: float = 0.0, on_episode: Callable[[int, float, int], None] | None = None,
                  on_frame: Callable[[np.ndarray], None] | None = None,
                  started: Callable[[], None] | None = None) -> list[float]:
    """Play whole games (every life) and return their unclipped scores; started: called once the env is made."""
    env = make_env(env_settings, seed=seed, render_mode="rgb_array" if on_frame else None)
    random = np.random.default_rng(seed)
    returns: list[float] = []
    try:
        observation = env.reset()
        if started:
            started()
        while len(returns) < episodes:
            if on_frame:
                on_frame(env.render())
            explore = random.random() < epsilon
            action = int(random.integers(env.num_actions)) if explore else int(policy(observation[None])[0])
            result = env.step(action)
            observation = result.observation
            if result.done:
                returns.append(result.episode.raw_return)
                if on_episode:
                    on_episode(len(returns), result.episode.raw_return, result.episode.length)
                observation = env.reset()
    finally:
        env.close()
    return returns
