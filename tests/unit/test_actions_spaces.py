"""Box actions through the env side: the spaces rlsup trains and its sentences for the others, what an env is handed,
a diverged policy's NaN, vectors of continuous envs, the algorithm check, and evaluation with float actions."""
from __future__ import annotations

import numpy as np
import pytest
from continuous_envs import DRIFT64_ID, DRIFT_ID, MODULE, REFUSED

from rlsup import spec as specs
from rlsup.spec import registry
from rlsup.algos.envs.actions import ActionSpace, EnvActions
from rlsup.algos.envs.check import check_env
from rlsup.algos.envs.faults import ActionFault
from rlsup.algos.envs.sources import EnvError, describe_env
from rlsup.algos.envs.training import make_env, probe_env
from rlsup.algos.envs.vector import SerialVectorEnv
from rlsup.algos.evaluate import play_episodes, random_action
from rlsup.spec import EnvSection

DRIFT = EnvSection(id=DRIFT_ID, imports=[MODULE])


@pytest.mark.parametrize("env_id, words", sorted(REFUSED.items()))
def test_action_spaces_rlsup_cannot_train_are_refused_in_one_sentence(env_id: str, words: str) -> None:
    with pytest.raises(EnvError, match=f"env id '{env_id}' has the action space .*{words}".replace("(", r"\(")
                       .replace(")", r"\)")) as raised:
        describe_env(EnvSection(id=env_id, imports=[MODULE]))
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("env_id, actions, words", [
    ("Pendulum-v1", ActionSpace(1, (-2.0,), (2.0,)), "a 1-vector in [-2, 2]"),
    ("MountainCarContinuous-v0", ActionSpace(1, (-1.0,), (1.0,)), "a 1-vector in [-1, 1]"),
    ("LunarLanderContinuous-v3", ActionSpace(2, (-1.0,) * 2, (1.0,) * 2), "a 2-vector in [-1, 1]"),
    ("Hopper-v5", ActionSpace(3, (-1.0,) * 3, (1.0,) * 3), "a 3-vector in [-1, 1]"),
    ("CartPole-v1", ActionSpace(2), "2 actions"),
    ("Ant-v5", ActionSpace(8, (-1.0,) * 8, (1.0,) * 8), "an 8-vector in [-1, 1]"),
])
def test_envs_describe_their_actions(env_id: str, actions: ActionSpace, words: str) -> None:
    description = describe_env(EnvSection(id=env_id))
    assert description.actions == actions and description.num_actions == actions.count
    assert actions.describe() == words
    assert probe_env(EnvSection(id=env_id))[2] == actions.count  # probe_env keeps its shape


def test_a_continuous_env_is_handed_its_boxs_dtype_within_its_bounds() -> None:
    env = make_env(DRIFT, seed=3)
    env.reset()
    env.step(np.array([0.25, -0.5]))                                # float64 in: the Box's float32 out
    env.step(np.array([1.0000001, -7.0], np.float32))              # a rounding past a bound, and far past one
    env.step([np.float32(0.1), np.float32(0.2)])
    received = env._stack.unwrapped.received
    assert all(type(action) is np.ndarray and action.dtype == np.float32 for action in received)
    assert np.array_equal(received[0], np.array([0.25, -0.5], np.float32))
    assert np.array_equal(received[1], np.array([1.0, -1.0], np.float32))
    assert np.array_equal(received[2], np.array([0.1, 0.2], np.float32))
    wide = make_env(EnvSection(id=DRIFT64_ID, imports=[MODULE]), seed=3)
    wide.reset()
    wide.step(np.array([0.1, 0.2], np.float32))
    assert wide._stack.unwrapped.received[0].dtype == np.float64


@pytest.mark.parametrize("action", [[np.nan, 0.0], [0.5, np.inf], [-np.inf, -np.inf]])
def test_a_non_finite_action_is_one_sentence_blaming_the_learner(action: list) -> None:
    env = make_env(DRIFT, seed=0)
    env.reset()
    env.step([0.0, 0.0])
    env.step([0.0, 0.0])
    with pytest.raises(ActionFault) as raised:
        env.step(np.array(action, np.float32))
    message = str(raised.value)
    assert f"non-finite action {np.array(action, np.float32).tolist()} at step 3" in message
    assert f"env '{DRIFT_ID}'" in message and "the learner has diverged" in message and "\n" not in message
    assert isinstance(raised.value, EnvError)  # the worker says it as the job's one sentence, as an env's fault


def test_an_action_of_the_wrong_length_is_refused() -> None:
    env = make_env(DRIFT, seed=0)
    env.reset()
    with pytest.raises(ActionFault, match=r"shape \(3,\) .*whose actions are a 2-vector in \[-1, 1\]"):
        env.step(np.zeros(3, np.float32))


def test_a_vector_of_continuous_envs_takes_one_row_per_env() -> None:
    vector = SerialVectorEnv([make_env(DRIFT, seed=seed) for seed in (1, 2, 3)])
    assert vector.actions == ActionSpace(2, (-1.0, -1.0), (1.0, 1.0)) and vector.num_actions == 2
    vector.reset()
    actions = np.random.default_rng(0).uniform(-1, 1, size=(3, 2)).astype(np.float32)
    vector.step(actions)
    for env, row in zip(vector.envs, actions):
        assert np.array_equal(env._stack.unwrapped.received[-1], row)
    vector.close()


def test_actions_are_saved_as_the_env_was_handed_them_and_strangers_arrays_are_refused() -> None:
    from gymnasium.spaces import Box, Discrete

    continuous = EnvActions("Box-v0", Box(-1.0, 1.0, (3,), np.float32))
    rows = [np.array([0.1, -0.2, 1.0], np.float32), np.array([np.float32(1e-8), 0.0, -1.0], np.float32)]
    saved = continuous.saved(rows)
    assert saved.dtype == np.float32 and saved.shape == (2, 3)
    assert all(np.array_equal(one, other) for one, other in zip(continuous.loaded(saved), rows))
    assert continuous.saved([]).shape == (0, 3) and continuous.loaded(continuous.saved([])) == []
    for stranger in (saved.astype(np.float64), saved[:, :2], np.zeros(3, np.int64)):
        assert "not this env's float32 vectors of 3" in continuous.loaded(stranger)
    discrete = EnvActions("Discrete-v0", Discrete(4))
    assert discrete.saved([1, 3]).dtype == np.int64 and discrete.saved([1, 3]).shape == (2,)  # as before
    assert discrete.loaded(np.array([1, 3], np.int64)) == [1, 3]
    assert "not this env's discrete ones" in discrete.loaded(saved)


def job_text(algo: str, env_id: str) -> str:
    return f'[job]\nalgo = "{algo}"\ntotal_steps = 1000\n\n[env]\nid = "{env_id}"\n'


def algorithms_training(kind: str) -> str:
    """The advice's list: every registered algorithm that trains this kind (V-trace trains both once widened)."""
    return " or ".join(f'"{name}"' for name in registry.algorithm_names() if kind in registry.get(name).action_kinds)


def test_check_env_refuses_an_algorithm_that_does_not_train_the_envs_kind_of_actions() -> None:
    text = job_text("dqn", "Pendulum-v1")
    with pytest.raises(specs.SpecError) as raised:
        check_env(specs.loads(text), "pendulum.toml", text)
    assert str(raised.value) == ("pendulum.toml:2: job.algo: env id 'Pendulum-v1' has continuous actions (a 1-vector "
                                 "in [-2, 2]); algo 'dqn' trains discrete ones: use algo = "
                                 + algorithms_training("continuous"))
    assert '"sac"' in algorithms_training("continuous") and '"dqn"' not in algorithms_training("continuous")
    text = job_text("sac", "CartPole-v1")
    with pytest.raises(specs.SpecError) as raised:
        check_env(specs.loads(text), "cartpole.toml", text)
    assert str(raised.value).endswith("'CartPole-v1' has discrete actions (2 actions); algo 'sac' trains continuous "
                                      "ones: use algo = " + algorithms_training("discrete"))


def test_check_env_reports_the_actions_of_an_env_its_algorithm_trains() -> None:
    text = job_text("sac", "Pendulum-v1")
    checked = check_env(specs.loads(text), "pendulum.toml", text)
    assert checked.actions == ActionSpace(1, (-2.0,), (2.0,)) and checked.num_actions == 1


def test_evaluation_plays_the_policys_vector_and_explores_within_the_bounds() -> None:
    played = []

    def policy(observations: np.ndarray) -> np.ndarray:
        played.append(observations.shape)
        return np.full((len(observations), 2), 0.5, np.float32)

    returns = play_episodes(policy, DRIFT, seed=5, episodes=2)
    assert len(returns) == 2 and len(played) == 50 and played[0] == (1, 2)
    random = np.random.default_rng(0)
    draws = np.stack([random_action(ActionSpace(2, (-1.0, 0.0), (1.0, 3.0)), random) for _ in range(500)])
    assert draws.dtype == np.float32 and (draws[:, 0] >= -1).all() and (draws[:, 1] <= 3).all()
    assert draws[:, 1].min() < 0.1 and draws[:, 1].max() > 2.9  # the whole of each bound
    exploring = play_episodes(lambda observations: np.full((1, 2), np.nan), DRIFT, seed=5, episodes=1, epsilon=1.0)
    assert len(exploring) == 1  # every action drawn: the policy's NaN never reached the env
