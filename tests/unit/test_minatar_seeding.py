"""MinAtar reseeded in place steps exactly as MinAtar seeded its own way: same observations, rewards and ends."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlsup.algos.envs.sources import make_stack
from rlsup.algos.envs.minatar_seeding import ReseedInPlace
from rlsup.spec import EnvSection

pytest.importorskip("minatar")


def trajectory(stack: gym.Env, seeds: list[int], steps_per_seed: int = 300) -> list:
    """Every observation, reward and end over seeded resets, with a fixed action sequence (sticky actions on)."""
    actions = np.random.default_rng(7)
    record = []
    for seed in seeds:
        observation, _ = stack.reset(seed=seed)
        record.append(observation.tobytes())
        for _ in range(steps_per_seed):
            observation, reward, terminated, truncated, _ = stack.step(int(actions.integers(stack.action_space.n)))
            record.append((observation.tobytes(), reward, terminated, truncated))
            if terminated or truncated:
                observation, _ = stack.reset(seed=(seed + len(record)) % 2**32)
                record.append(observation.tobytes())
    return record


@pytest.mark.parametrize("game", ["Breakout", "SpaceInvaders", "Asterix"])
def test_reseeding_in_place_gives_minatars_own_trajectory(game):
    env_id = f"MinAtar/{game}-v1"
    ours = make_stack(EnvSection(id=env_id))
    assert isinstance(ours, ReseedInPlace)
    theirs = gym.make(env_id, disable_env_checker=True)
    seeds = [3, 3, 11, 2**31 - 1]  # a seed again, as a resume's replay reseeds an episode's
    expected = trajectory(theirs, seeds)
    assert trajectory(ours, seeds) == expected
    assert sum(1 for entry in expected if isinstance(entry, bytes)) > len(seeds)  # episodes ended and reset
