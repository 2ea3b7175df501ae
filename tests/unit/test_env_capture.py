"""Env state capture: each layer's capturer where every layer has one, else seeded action replay checked by digest."""
from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import TransformReward

from plugins.replay_test_envs import COUNTER_ID, NOISY_ID
from rlsup.algos.envs.capture import EnvError, load_env_states
from rlsup.algos.envs.action_replay import ReplayMismatch, stable_digest
from rlsup.algos.envs.training import EnvStep, TrainingEnv, make_env
from rlsup.checkpoint.store import load_checkpoint, write_checkpoint
from rlsup.spec import EnvSection
from test_envs import run as play

BREAKOUT = EnvSection(id="ALE/Breakout-v5", preset="atari", episodic_life=True, clip_rewards=True)


def through_the_store(state: dict, run_dir: Path) -> dict:
    """The state as a resume reads it: written as a real checkpoint and loaded back (arrays memory-mapped)."""
    entry = write_checkpoint(run_dir, {"env": state}, step=1, episodes=0, reason="interval", fingerprint="-",
                             spec_sha256="-", metrics_bytes=0, keep=1)
    return load_checkpoint(entry.path)[1]["env"]


def doubled_cartpole(seed: int) -> TrainingEnv:
    """CartPole under a wrapper rlsup has no capturer for, so that its stack takes the action-replay path."""
    stack = TransformReward(gym.make("CartPole-v1", disable_env_checker=True), lambda reward: 2 * reward)
    return TrainingEnv(stack, EnvSection(id="CartPole-v1"), seed, None)


def assert_same_steps(first: list[EnvStep], second: list[EnvStep]) -> None:
    assert len(first) == len(second)
    for one, other in zip(first, second):
        assert np.array_equal(one.observation, other.observation)
        assert (one.reward, one.terminal, one.done, one.truncated) == (other.reward, other.terminal, other.done,
                                                                      other.truncated)
        assert one.episode == other.episode  # raw return and length: the bookkeeping came back too


@pytest.mark.parametrize("settings", [EnvSection(id="CartPole-v1"), EnvSection(id="MountainCar-v0"),
                                      EnvSection(id="Acrobot-v1"), BREAKOUT])
def test_stacks_with_a_capturer_on_every_layer_keep_their_state_format(settings: EnvSection) -> None:
    env = make_env(settings, seed=0)
    env.reset()
    state = env.state_dict()
    assert set(state) == {"format", "settings", "chain", "layers", "episode"}
    assert set(state["layers"]) == set(state["chain"])
    env.close()


@pytest.mark.parametrize("make", [
    lambda seed: make_env(EnvSection(id=COUNTER_ID), seed=seed),
    doubled_cartpole,
])
def test_other_stacks_resume_by_action_replay_bit_for_bit(tmp_path: Path, make) -> None:
    original = make(7)
    actions = np.random.default_rng(0).integers(original.num_actions, size=700)
    original.reset()
    play(original, actions[:300])
    state = original.state_dict()
    assert set(state) == {"format", "settings", "chain", "replay", "episode"}
    assert len(state["replay"]["actions"]) > 0, "the state should fall mid-episode"
    copy = make(12345)
    copy.reset()
    assert copy.load_state_dict(through_the_store(state, tmp_path)) is None
    after = play(original, actions[300:])
    assert_same_steps(after, play(copy, actions[300:]))
    assert sum(step.done for step in after) >= 2  # and the reset seeds after the resume agree


def test_every_reset_on_the_replay_path_is_seeded_from_the_envs_own_generator() -> None:
    first, second, other = (make_env(EnvSection(id=COUNTER_ID), seed=seed) for seed in (3, 3, 4))
    actions = np.random.default_rng(1).integers(2, size=400)
    first.reset(), second.reset(), other.reset()
    first_steps, second_steps = play(first, actions), play(second, actions)
    assert_same_steps(first_steps, second_steps)
    assert [step.episode for step in first_steps if step.done] != [step.episode for step in play(other, actions)
                                                                   if step.done]


def test_a_state_taken_before_the_first_reset_restores_without_replay(tmp_path: Path) -> None:
    state = make_env(EnvSection(id=COUNTER_ID), seed=5).state_dict()
    assert state["replay"]["reset_seed"] is None and state["episode"]["pending_seed"] == 5
    copy = make_env(EnvSection(id=COUNTER_ID), seed=6)
    assert copy.load_state_dict(through_the_store(state, tmp_path)) is None
    assert np.array_equal(copy.reset(), make_env(EnvSection(id=COUNTER_ID), seed=5).reset())


def mid_episode(env_id: str, seed: int, steps: int) -> TrainingEnv:
    env = make_env(EnvSection(id=env_id), seed=seed)
    env.reset()
    for _ in range(steps):
        assert not env.step(1).done
    return env


def assert_restarts_fresh(env: TrainingEnv, mismatch: ReplayMismatch | None, detail: str) -> None:
    """A mismatch naming the env, and an env that refuses to step on until a fresh episode starts."""
    assert isinstance(mismatch, ReplayMismatch) and detail in mismatch.sentence(3)
    assert mismatch.sentence(3).startswith(f"env 3 ({mismatch.env_id}): replaying the ")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    assert env.step(0).observation[0] == 1  # a fresh episode's first step


def test_a_non_deterministic_env_does_not_replay_and_starts_a_fresh_episode(tmp_path: Path) -> None:
    state = mid_episode(NOISY_ID, seed=2, steps=4).state_dict()
    copy = make_env(EnvSection(id=NOISY_ID), seed=2)
    copy.reset()
    mismatch = copy.load_state_dict(through_the_store(state, tmp_path))
    assert_restarts_fresh(copy, mismatch, "4 actions since its seeded reset did not reproduce the saved observation")


def test_a_replay_that_ends_early_stops_there(tmp_path: Path) -> None:
    state = mid_episode(COUNTER_ID, seed=2, steps=8).state_dict()
    # A reset seed whose episode is shorter than the saved actions, as a changed env would give.
    probe = gym.make(COUNTER_ID)
    state["replay"]["reset_seed"] = next(seed for seed in range(1000) if probe.reset(seed=seed)[1]["length"] < 8)
    copy = make_env(EnvSection(id=COUNTER_ID), seed=2)
    assert_restarts_fresh(copy, copy.load_state_dict(through_the_store(state, tmp_path)), "ended the episode after")


def test_other_actions_than_the_saved_ones_do_not_reach_the_saved_state(tmp_path: Path) -> None:
    state = mid_episode(COUNTER_ID, seed=2, steps=3).state_dict()
    state["replay"]["actions"] = np.zeros_like(state["replay"]["actions"])
    copy = make_env(EnvSection(id=COUNTER_ID), seed=2)
    assert_restarts_fresh(copy, copy.load_state_dict(through_the_store(state, tmp_path)),
                          "did not reproduce the saved observation")


def test_load_env_states_resets_the_envs_that_did_not_replay(tmp_path: Path) -> None:
    envs = [make_env(EnvSection(id=env_id), seed=index) for index, env_id in enumerate([COUNTER_ID, NOISY_ID])]
    for env in envs:
        env.reset()
        env.step(1)
    states = through_the_store({str(index): env.state_dict() for index, env in enumerate(envs)}, tmp_path)
    fresh = [make_env(EnvSection(id=env_id), seed=9) for env_id in (COUNTER_ID, NOISY_ID)]
    restarts = load_env_states(fresh, states)
    assert [restart.index for restart in restarts] == [1]
    assert restarts[0].reason.startswith(f"env 1 ({NOISY_ID})") and restarts[0].observation[0] == 0
    assert fresh[0].step(0).observation[0] == 2 and fresh[1].step(0).observation[0] == 1


def test_a_state_of_the_other_capture_kind_is_refused(tmp_path: Path) -> None:
    state = make_env(EnvSection(id="CartPole-v1"), seed=0).state_dict()
    state["replay"] = state.pop("layers")
    with pytest.raises(EnvError, match="holds no 'layers' part"):
        make_env(EnvSection(id="CartPole-v1"), seed=0).load_state_dict(state)


def test_minatar_breakout_resumes_by_action_replay(tmp_path: Path) -> None:
    minatar_gym = pytest.importorskip("minatar.gym")
    if "MinAtar/Breakout-v1" not in gym.registry:
        minatar_gym.register_envs()
    settings = EnvSection(id="MinAtar/Breakout-v1")

    def make(seed: int) -> TrainingEnv:
        return TrainingEnv(gym.make(settings.id, disable_env_checker=True), settings, seed, None)

    original = make(11)
    actions = np.random.default_rng(2).integers(original.num_actions, size=900)
    original.reset()
    play(original, actions[:333])
    state = original.state_dict()
    copy = make(0)
    assert copy.load_state_dict(through_the_store(state, tmp_path)) is None
    assert_same_steps(play(original, actions[333:]), play(copy, actions[333:]))


@pytest.mark.parametrize("env_id", ["MinAtar/Breakout-v1", "MinAtar/Breakout-v0"])
def test_a_minatar_episode_resumes_bit_for_bit_with_the_action_it_carried_in(tmp_path: Path, env_id: str) -> None:
    """MinAtar keeps its last action across a reset, and a sticky first step repeats it: a pause at any step of
    an episode, its first included, must bring that action back, or the run goes on another way, unannounced."""
    pytest.importorskip("minatar")
    settings = EnvSection(id=env_id)
    left = 1  # the paddle's left in both action sets: an action a sticky step visibly repeats
    for seed in range(40):
        original = make_env(settings, seed=seed)
        actions = np.random.default_rng(seed).integers(original.num_actions, size=600)
        original.reset()
        steps = play(original, actions[:300])
        # The episode that follows ends moving left; pause at the first step of the next one, or one step in.
        while not steps[-1].done:
            steps.append(original.step(left))
        original.reset()
        play(original, actions[300:300 + seed % 2])
        copy = make_env(settings, seed=0)
        assert copy.load_state_dict(through_the_store(original.state_dict(), tmp_path / str(seed))) is None
        assert_same_steps(play(original, actions[300:]), play(copy, actions[300:]))


@pytest.mark.parametrize("carried", [{"last_action": 99}, {"last_action": -1}, {"last_action": "1"}, {}, [1]])
def test_a_minatar_carry_outside_the_game_starts_a_fresh_episode_and_says_why(carried) -> None:
    pytest.importorskip("minatar")
    original = make_env(EnvSection(id="MinAtar/Breakout-v1"), seed=3)
    original.reset()
    play(original, [1, 2, 1])
    state = original.state_dict()
    state["replay"]["carried"] = carried  # a stranger's checkpoint
    copy = make_env(EnvSection(id="MinAtar/Breakout-v1"), seed=0)
    mismatch = copy.load_state_dict(state)
    assert mismatch is not None and "carried a last action of" in mismatch.sentence(0), mismatch
    assert copy.reset().shape == original.observation_shape  # a fresh episode, and the env still works


def test_stable_digest_sees_every_bit_and_no_insertion_order() -> None:
    assert stable_digest({"a": 1, "b": np.zeros(2)}) == stable_digest({"b": np.zeros(2), "a": 1})
    distinct = [np.zeros(2, np.float32), np.zeros(2, np.float64), np.zeros((2, 1), np.float32), 0.0, -0.0, 0,
                False, None, "0", (0.0,), [0.0], {"x": 0.0}, np.array([0.0, 5e-324])]
    assert len({stable_digest(value) for value in distinct}) == len(distinct)
    assert stable_digest({"object": object()}) == stable_digest({"object": object()})  # no memory address
