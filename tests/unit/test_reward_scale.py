"""V-trace's reward normalisation: rewards over the running spread of the discounted return, resumable exactly."""
from __future__ import annotations

import numpy as np
import pytest

from rlsup.algos.reward_scale import EPSILON, PRIOR_COUNT, RewardScale


def steps(seed: int, count: int = 50, envs: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    generator = np.random.default_rng(seed)
    return [(generator.normal(-5.0, 3.0, envs), generator.random(envs) < 0.1) for _ in range(count)]


def test_rewards_are_divided_by_the_spread_of_every_discounted_return_so_far() -> None:
    gamma, scale, seen = 0.9, RewardScale(3, 0.9), []
    returns = np.zeros(3)
    for rewards, dones in steps(0):
        scaled = scale(rewards, dones)
        returns = returns * gamma + rewards
        seen.extend(returns)
        returns[dones] = 0.0
        # Chan's merge of the prior (one pseudo-observation, mean 0 and variance 1) with the returns seen.
        values = np.asarray(seen)
        total = PRIOR_COUNT + len(values)
        mean = values.sum() / total
        variance = (PRIOR_COUNT * (1.0 + mean ** 2) + ((values - mean) ** 2).sum()) / total
        np.testing.assert_allclose(scaled, rewards / np.sqrt(variance + EPSILON), rtol=1e-9)


def test_a_restored_scale_continues_as_the_saved_one() -> None:
    straight, paused = RewardScale(3, 0.99), RewardScale(3, 0.99)
    for rewards, dones in steps(1)[:20]:
        straight(rewards, dones)
        paused(rewards, dones)
    resumed = RewardScale(3, 0.99)
    resumed.load_state_dict(paused.state_dict())
    for rewards, dones in steps(1)[20:]:
        assert np.array_equal(straight(rewards, dones), resumed(rewards, dones))


def test_a_saved_scale_of_another_env_count_is_refused() -> None:
    with pytest.raises(ValueError, match="follows 3 envs, this actor steps 4"):
        RewardScale(4, 0.9).load_state_dict(RewardScale(3, 0.9).state_dict())
