"""The serial vectoriser: the same trajectories as its envs stepped alone, auto-reset, per-env state capture."""
from __future__ import annotations

import numpy as np
import pytest

from rlsup.algos.envs.training import make_env
from rlsup.algos.envs.vector import SerialVectorEnv, VectorStep
from rlsup.algos.envs.vectorise import env_seeds, make_vector_env
from rlsup.spec import EnvSection

# A short time limit puts truncations and resets inside a few dozen steps.
CARTPOLE = EnvSection(id="CartPole-v1", max_episode_steps=12)
SEEDS = [11, 12, 13]


def random_actions(steps: int, count: int) -> np.ndarray:
    return np.random.default_rng(0).integers(2, size=(steps, count))


def test_env_seeds_are_the_first_children_of_the_job_seed() -> None:
    seeds = env_seeds(np.random.SeedSequence(7), 3)
    children = np.random.SeedSequence(7).spawn(3)
    assert seeds == [int(child.generate_state(1)[0]) for child in children]
    assert len(set(seeds)) == 3 and env_seeds(np.random.SeedSequence(7), 3) == seeds


def test_a_vector_steps_each_env_as_it_would_step_alone() -> None:
    vector = make_vector_env(CARTPOLE, SEEDS)
    alone = [make_env(CARTPOLE, seed=seed) for seed in SEEDS]
    observations = vector.reset()
    assert np.array_equal(observations, np.stack([env.reset() for env in alone]))
    ended = 0
    for actions in random_actions(60, len(SEEDS)):
        result = vector.step(actions)
        for index, (env, action) in enumerate(zip(alone, actions)):
            expected = env.step(int(action))
            assert result.rewards[index] == expected.reward
            assert (result.terminals[index], result.dones[index], result.truncated[index]) == (
                expected.terminal, expected.done, expected.truncated)
            if expected.done:
                ended += 1
                assert np.array_equal(result.final_observations[index], expected.observation)
                assert result.episodes[index] == expected.episode
                assert np.array_equal(result.observations[index], env.reset())
            else:
                assert index not in result.final_observations and index not in result.episodes
                assert np.array_equal(result.observations[index], expected.observation)
    assert ended >= len(SEEDS), "the time limit should have ended every env's episode at least once"
    vector.close()


def test_a_state_taken_mid_episode_continues_bit_for_bit_in_a_new_vector() -> None:
    original = make_vector_env(CARTPOLE, SEEDS)
    original.reset()
    actions = random_actions(50, len(SEEDS))
    for step_actions in actions[:17]:
        observations = original.step(step_actions).observations
    state = original.state_dict()
    assert sorted(state) == ["0", "1", "2"]
    copy = make_vector_env(CARTPOLE, [0, 0, 0])  # other seeds: everything must come from the state
    copy.reset()
    copy.load_state_dict(state)
    for step_actions in actions[17:]:
        assert_same_vector_step(original.step(step_actions), copy.step(step_actions))
    assert observations.dtype == np.float32


def assert_same_vector_step(first: VectorStep, second: VectorStep) -> None:
    for name in ("observations", "rewards", "terminals", "dones", "truncated"):
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    assert first.final_observations.keys() == second.final_observations.keys()
    assert all(np.array_equal(first.final_observations[key], second.final_observations[key])
               for key in first.final_observations)
    assert first.episodes == second.episodes


def test_a_state_of_another_env_count_is_refused() -> None:
    state = make_vector_env(CARTPOLE, SEEDS).state_dict()
    with pytest.raises(ValueError, match="holds 3 envs, this vector steps 2"):
        make_vector_env(CARTPOLE, SEEDS[:2]).load_state_dict(state)


def test_an_empty_vector_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one env"):
        SerialVectorEnv([])
