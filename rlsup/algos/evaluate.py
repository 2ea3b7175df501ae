"""Greedy evaluation on environments and random streams of its own: the best discrete action, or the policy's
mean continuous action."""
from __future__ import annotations

from typing import Callable

import numpy as np

from rlsup.algos.contract import Policy
from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.training import make_env
from rlsup.spec import EnvSection


def evaluation_seed(job_seed: int, step: int) -> int:
    """A seed for the evaluation at step that no training stream shares."""
    return int(np.random.SeedSequence([job_seed, 0xE7A1, step]).generate_state(1)[0])


def play_episodes(policy: Policy, env_settings: EnvSection, *, seed: int, episodes: int,
                  epsilon: float = 0.0, on_episode: Callable[[int, float, int], None] | None = None,
                  on_frame: Callable[[np.ndarray], None] | None = None,
                  started: Callable[[], None] | None = None) -> list[float]:
    """Play whole games (every life) and return their unclipped scores; started: called once the env is made.

    The policy's action is played as it is: a discrete one's number, or a continuous one's vector (the
    deterministic mean, which the env clips to its bounds). With probability epsilon a random action is
    played instead, drawn from the evaluation's own stream: uniform among the discrete ones, or uniform
    within a continuous one's bounds."""
    if env_settings.source == "fused":
        return play_fused_episodes(policy, env_settings, seed=seed, episodes=episodes, epsilon=epsilon,
                                   on_episode=on_episode, started=started)
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
            action = random_action(env.actions, random) if explore else policy(observation[None])[0]
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


def play_fused_episodes(policy: Policy, env_settings: EnvSection, *, seed: int, episodes: int, epsilon: float,
                        on_episode: Callable[[int, float, int], None] | None,
                        started: Callable[[], None] | None) -> list[float]:
    """play_episodes on one fused game on the CPU, its episodes one after another (a fused game draws no frames)."""
    import torch

    from rlsup.algos.envs.fused import make_fused_game

    game = make_fused_game(env_settings, 1, seed, torch.device("cpu"))
    random = np.random.default_rng(seed)
    returns: list[float] = []
    score, length = 0.0, 0
    try:
        observations = game.reset()
        if started:
            started()
        while len(returns) < episodes:
            explore = random.random() < epsilon
            action = random_action(game.actions, random) if explore else policy(observations.numpy())[0]
            result = game.step(torch.as_tensor([action], dtype=torch.int64))
            game.check_rewards(result.rewards)
            score, length = score + float(result.rewards[0]), length + 1
            observations = result.observations
            if bool(result.terminations[0] or result.truncations[0]):
                returns.append(score)
                if on_episode:
                    on_episode(len(returns), score, length)
                score, length = 0.0, 0
    finally:
        game.close()
    return returns


def random_action(actions: ActionSpace, random: np.random.Generator) -> int | np.ndarray:
    """One action drawn uniformly: a discrete one's number, or a vector within a continuous one's bounds."""
    if not actions.continuous:
        return int(random.integers(actions.count))
    low, high = actions.bounds()
    return random.uniform(low, high).astype(np.float32)
