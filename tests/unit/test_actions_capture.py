"""Continuous envs paused mid-episode resume bit for bit: classic control and MuJoCo by their own state, Box2D and
other envs by replaying float actions exactly; a stranger's saved state is one sentence, never a crash."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from continuous_envs import DRIFT64_ID, DRIFT_ID, MODULE
from test_env_capture import through_the_store

from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.training import EnvStep, TrainingEnv, make_env
from rlsup.spec import EnvSection

# Layer capture: every layer has a capturer of its own.
CAPTURED = ["Pendulum-v1", "MountainCarContinuous-v0", "Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5",
            "Humanoid-v5", "HumanoidStandup-v5", "Swimmer-v5", "Reacher-v5", "Pusher-v5", "InvertedPendulum-v5",
            "InvertedDoublePendulum-v5"]
# Action replay: Box2D worlds cannot be captured; the drift test env has no capturer.
REPLAYED = ["LunarLanderContinuous-v3", "BipedalWalker-v3", DRIFT_ID, DRIFT64_ID]


def settings_of(env_id: str) -> EnvSection:
    return EnvSection(id=env_id, imports=[MODULE] if env_id.startswith("ContinuousTests/") else [])


def random_actions(env: TrainingEnv, count: int, seed: int) -> np.ndarray:
    """Actions inside and a little past the bounds, in float64: the env is handed its Box's dtype, clipped."""
    low, high = env.actions.bounds()
    return np.random.default_rng(seed).uniform(1.1 * low, 1.1 * high, size=(count, env.actions.count))


def play(env: TrainingEnv, actions: np.ndarray) -> list[EnvStep]:
    steps = []
    for action in actions:
        steps.append(env.step(action))
        if steps[-1].done:
            env.reset()
    return steps


def assert_identical(first: list[EnvStep], second: list[EnvStep]) -> None:
    assert len(first) == len(second)
    for one, other in zip(first, second):
        assert one.observation.dtype == other.observation.dtype
        assert np.array_equal(one.observation, other.observation)
        assert (one.reward, one.raw_reward, one.terminal, one.done, one.truncated, one.episode) == (
            other.reward, other.raw_reward, other.terminal, other.done, other.truncated, other.episode)


def paused_and_resumed(env_id: str, tmp_path: Path, before: int, after: int) -> tuple[dict, list, list]:
    """The state after `before` random steps (or a few more, so that it falls mid-episode), the `after` steps
    that follow it, and those of a fresh env made with another seed and restored from the stored state."""
    original = make_env(settings_of(env_id), seed=7)
    actions = random_actions(original, before + after + 20, seed=1)
    original.reset()
    play(original, actions[:before])
    while original.state_dict()["episode"]["length"] == 0:  # Humanoid falls within a few random steps
        play(original, actions[before:before + 1])
        before += 1
    state = original.state_dict()
    copy = make_env(settings_of(env_id), seed=12345)
    copy.reset()
    play(copy, actions[:3])  # elsewhere in an episode of its own
    assert copy.load_state_dict(through_the_store(state, tmp_path)) is None
    following = actions[before:before + after]
    straight, resumed = play(original, following), play(copy, following)
    original.close(), copy.close()
    return state, straight, resumed


@pytest.mark.parametrize("env_id", CAPTURED)
def test_captured_continuous_envs_resume_bit_for_bit(env_id: str, tmp_path: Path) -> None:
    state, straight, resumed = paused_and_resumed(env_id, tmp_path, before=23, after=60)
    assert "layers" in state and "replay" not in state
    assert_identical(straight, resumed)


@pytest.mark.parametrize("env_id", REPLAYED)
def test_replayed_continuous_envs_resume_bit_for_bit(env_id: str, tmp_path: Path) -> None:
    state, straight, resumed = paused_and_resumed(env_id, tmp_path, before=17, after=60)
    saved = state["replay"]["actions"]
    assert saved.ndim == 2 and len(saved) == state["episode"]["length"] > 0
    assert saved.dtype == (np.float64 if env_id == DRIFT64_ID else np.float32)  # as the env's Box holds them
    assert_identical(straight, resumed)
    if env_id in (DRIFT_ID, DRIFT64_ID):
        assert any(step.done for step in straight)  # and the seeds of the resets after the resume agree


def test_replayed_actions_are_those_the_env_received_every_bit(tmp_path: Path) -> None:
    env = make_env(settings_of(DRIFT_ID), seed=2)
    env.reset()
    actions = np.array([[0.1, -0.3], [np.nextafter(1.0, 2.0), -1.5], [1e-45, -0.0]], np.float64)
    play(env, actions)
    saved = env.state_dict()["replay"]["actions"]
    received = np.stack(env._stack.unwrapped.received)
    assert saved.tobytes() == received.tobytes() and saved.dtype == np.float32
    assert np.array_equal(saved[1], [1.0, -1.0])  # clipped to the bounds


def test_a_discrete_replay_keeps_its_saved_format() -> None:
    # The format of checkpoints from before continuous actions: int64 numbers, one per step.
    import gymnasium as gym
    from gymnasium.wrappers import TransformReward

    stack = TransformReward(gym.make("CartPole-v1", disable_env_checker=True), lambda reward: 2 * reward)
    env = TrainingEnv(stack, EnvSection(id="CartPole-v1"), 3, None)
    env.reset()
    play(env, [1, 0, 1])
    saved = env.state_dict()["replay"]["actions"]
    assert saved.dtype == np.int64 and saved.tolist() == [1, 0, 1]


@pytest.mark.parametrize("change, words", [
    (lambda state: state["physics"][:-1], "the saved MuJoCo state is float64[57], this env's model holds float64[58]"),
    (lambda state: state["physics"].astype(np.float32), "the saved MuJoCo state is float32[58]"),
    (lambda state: np.zeros(58, object), "the saved MuJoCo state is object[58]"),
])
def test_a_strangers_mujoco_state_is_one_sentence(change, words: str) -> None:
    env = make_env(EnvSection(id="Hopper-v5"), seed=0)
    env.reset()
    play(env, random_actions(env, 5, seed=0))
    state = env.state_dict()
    state["layers"]["HopperEnv"]["physics"] = change(state["layers"]["HopperEnv"])
    with pytest.raises(EnvError, match=words.replace("[", r"\[").replace("]", r"\]")):
        make_env(EnvSection(id="Hopper-v5"), seed=0).load_state_dict(state)


def test_a_strangers_mujoco_kinematics_of_another_model_are_refused() -> None:
    env = make_env(EnvSection(id="Hopper-v5"), seed=0)
    env.reset()
    state = env.state_dict()
    state["layers"]["HopperEnv"]["kinematics"]["xpos"] = np.zeros((2, 3))
    with pytest.raises(EnvError, match=r"the saved xpos is float64\[2, 3\], this env's model holds float64\[5, 3\]"):
        make_env(EnvSection(id="Hopper-v5"), seed=0).load_state_dict(state)


def test_saved_float_actions_of_another_shape_are_one_sentence() -> None:
    env = make_env(settings_of(DRIFT_ID), seed=0)
    env.reset()
    play(env, random_actions(env, 4, seed=0))
    state = env.state_dict()
    state["replay"]["actions"] = state["replay"]["actions"].astype(np.float64)
    with pytest.raises(EnvError, match="the saved action replay holds actions of float64\\[4, 2\\], not this env's "
                                       "float32 vectors of 2"):
        make_env(settings_of(DRIFT_ID), seed=0).load_state_dict(state)


def test_making_a_mujoco_env_leaves_no_log_file_and_says_nothing(tmp_path: Path, monkeypatch, capfd) -> None:
    # mujoco 4 warns when it compiles HalfCheetah's model; by default into stderr and ./MUJOCO_LOG.TXT.
    monkeypatch.chdir(tmp_path)
    make_env(EnvSection(id="HalfCheetah-v5"), seed=0).close()
    assert list(tmp_path.iterdir()) == [] and "settotalmass" not in capfd.readouterr().err
