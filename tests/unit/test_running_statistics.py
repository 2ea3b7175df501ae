"""V-trace's normalisation: running moments, rewards over the running spread of the discounted return, resumable."""
from __future__ import annotations

import numpy as np
import pytest

from rlsup.algos.running_statistics import EPSILON, PRIOR_COUNT, RewardScale, RunningMoments


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


def test_running_moments_of_vectors_are_each_entrys_mean_and_variance_with_the_prior() -> None:
    generator = np.random.default_rng(2)
    batches = [generator.normal([1.0, -3.0], [2.0, 0.5], size=(count, 2)) for count in (1, 7, 30)]
    moments = RunningMoments((2,))
    for batch in batches:
        moments.update(batch)
    values = np.concatenate(batches)
    total = PRIOR_COUNT + len(values)
    mean = values.sum(axis=0) / total
    variance = (PRIOR_COUNT * (1.0 + mean ** 2) + ((values - mean) ** 2).sum(axis=0)) / total
    np.testing.assert_allclose(moments.mean, mean, rtol=1e-9)
    np.testing.assert_allclose(moments.std(), np.sqrt(variance + EPSILON), rtol=1e-9)
