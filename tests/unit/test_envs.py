"""Training envs: a state captured mid-episode, stored as JSON and .npy, continues bit for bit."""
from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from rlsup.algos.envs.training import EnvError, EnvStep, TrainingEnv, make_env, probe_env
from rlsup.spec import EnvSection

BREAKOUT = EnvSection(id="ALE/Breakout-v5", preset="atari", episodic_life=True, clip_rewards=True)


def store_and_load(state: dict, directory: Path) -> dict:
    """Write arrays and bytes to files, everything else to JSON, and read it all back: no pickle."""
    names = (f"leaf-{number}" for number in itertools.count())

    def encode(value):
        if isinstance(value, dict):
            assert all(type(key) is str for key in value), list(value)
            return {key: encode(item) for key, item in value.items()}
        if isinstance(value, np.ndarray):
            name = next(names) + ".npy"
            np.save(directory / name, value, allow_pickle=False)
            return {"__npy__": name}
        if isinstance(value, bytes):
            name = next(names) + ".bin"
            (directory / name).write_bytes(value)
            return {"__bytes__": name}
        if isinstance(value, list):
            return [encode(item) for item in value]
        assert value is None or type(value) in (bool, int, float, str), type(value)
        return value

    def decode(value):
        if isinstance(value, dict) and "__npy__" in value:
            return np.load(directory / value["__npy__"], allow_pickle=False)
        if isinstance(value, dict) and "__bytes__" in value:
            return (directory / value["__bytes__"]).read_bytes()
        if isinstance(value, dict):
            return {key: decode(item) for key, item in value.items()}
        if isinstance(value, list):
            return [decode(item) for item in value]
        return value

    return decode(json.loads(json.dumps(encode(state))))


def assert_same_step(first: EnvStep, second: EnvStep) -> None:
    assert np.array_equal(first.observation, second.observation)
    assert first.observation.dtype == second.observation.dtype
    assert (first.reward, first.raw_reward) == (second.reward, second.raw_reward)
    assert (first.terminal, first.done, first.truncated) == (second.terminal, second.done, second.truncated)
    assert first.episode == second.episode


def assert_same_tree(first, second) -> None:
    if isinstance(first, dict):
        assert first.keys() == second.keys()
        for key in first:
            assert_same_tree(first[key], second[key])
    elif isinstance(first, np.ndarray):
        assert np.array_equal(first, second) and first.dtype == second.dtype
    else:
        assert first == second


def step_both(first: TrainingEnv, second: TrainingEnv, actions) -> list[EnvStep]:
    """Step two envs with the same actions, resetting both after each episode; they must agree throughout."""
    steps = []
    for action in actions:
        step = first.step(int(action))
        assert_same_step(step, second.step(int(action)))
        steps.append(step)
        if step.done:
            assert np.array_equal(first.reset(), second.reset())
    assert_same_tree(first.state_dict(), second.state_dict())
    return steps


def run(env: TrainingEnv, actions) -> list[EnvStep]:
    steps = []
    for action in actions:
        steps.append(env.step(int(action)))
        if steps[-1].done:
            env.reset()
    return steps


def restored(env: TrainingEnv, settings: EnvSection, directory: Path) -> TrainingEnv:
    """A fresh env, made with another seed, continuing from env's state as stored on disk."""
    copy = make_env(settings, seed=12345)
    copy.load_state_dict(store_and_load(env.state_dict(), directory))
    return copy


@pytest.mark.parametrize("env_id, max_episode_steps, steps", [
    ("CartPole-v1", 0, 1500), ("MountainCar-v0", 0, 450), ("Acrobot-v1", 60, 200)])
def test_classic_control_continues_bit_for_bit(tmp_path, env_id, max_episode_steps, steps):
    settings = EnvSection(id=env_id, max_episode_steps=max_episode_steps)
    original = make_env(settings, seed=7)
    actions = np.random.default_rng(0).integers(original.num_actions, size=137 + steps)
    original.reset()
    run(original, actions[:137])
    copy = restored(original, settings, tmp_path)
    after = step_both(original, copy, actions[137:])
    assert sum(step.done for step in after) >= 2
    assert all(step.observation.dtype == np.float32 for step in after)
    original.close()
    copy.close()


def test_state_taken_before_the_first_reset_keeps_the_construction_seed(tmp_path):
    settings = EnvSection(id="CartPole-v1")
    original = make_env(settings, seed=5)
    copy = restored(original, settings, tmp_path)
    first_observation = original.reset()
    assert np.array_equal(first_observation, copy.reset())
    assert np.array_equal(first_observation, make_env(settings, seed=5).reset())
    step_both(original, copy, np.random.default_rng(1).integers(2, size=100))


def test_classic_time_limit_truncates_without_a_terminal():
    env = make_env(EnvSection(id="MountainCar-v0", max_episode_steps=20), seed=0)
    env.reset()
    steps = run(env, [0] * 20)
    assert [step.done for step in steps] == [False] * 19 + [True]
    assert steps[-1].truncated and not steps[-1].terminal
    assert steps[-1].episode.length == 20 and steps[-1].episode.raw_return == -20.0


def play_until_life_lost(env: TrainingEnv, random: np.random.Generator) -> list[EnvStep]:
    steps = []
    while not steps or not (steps[-1].terminal and not steps[-1].done):
        steps += run(env, [random.integers(env.num_actions)])
    return steps


def test_breakout_captured_after_a_lost_life_continues_across_game_over(tmp_path):
    random = np.random.default_rng(3)
    original = make_env(BREAKOUT, seed=11)
    original.reset()
    before = play_until_life_lost(original, random)
    before += run(original, random.integers(original.num_actions, size=15))
    state = original.state_dict()
    assert 0 < state["episode"]["lives"] < 5 and not state["episode"]["needs_reset"]
    assert "FireReset" in state["chain"] and state["settings"]["fire_reset"] is True
    copy = restored(original, BREAKOUT, tmp_path)
    after = step_both(original, copy, random.integers(original.num_actions, size=700))
    # The game ended and a no-op reset drew from the restored RNG, then play went on identically.
    assert sum(step.done for step in after) >= 2
    original.close()
    copy.close()


def noop_play(settings: EnvSection, steps: int) -> list[EnvStep]:
    env = make_env(settings, seed=5)
    env.reset()
    played = []
    while len(played) < steps and not (played and played[-1].done):
        played.append(env.step(0))
    env.close()
    return played


def test_fire_reset_launches_the_ball_after_reset_and_after_each_lost_life():
    """A policy that never presses FIRE: with fire_reset the game goes on and ends, without it Breakout
    waits for ever with the ball held."""
    fired = noop_play(BREAKOUT, 5_000)
    assert fired[-1].done and fired[-1].terminal and not fired[-1].truncated
    assert sum(step.terminal and not step.done for step in fired) == 4  # every life was served
    held = noop_play(dataclasses.replace(BREAKOUT, fire_reset=False), 2_000)
    assert len(held) == 2_000 and not any(step.terminal for step in held)


def test_fire_reset_wraps_only_games_that_have_fire():
    assert "FireReset" in make_env(BREAKOUT, seed=0).state_dict()["chain"]
    freeway = EnvSection(id="ALE/Freeway-v5", preset="atari")  # actions NOOP, UP, DOWN
    assert "FireReset" not in make_env(freeway, seed=0).state_dict()["chain"]
    no_fire = dataclasses.replace(BREAKOUT, fire_reset=False)
    assert "FireReset" not in make_env(no_fire, seed=0).state_dict()["chain"]


def test_breakout_with_sticky_actions_and_a_time_limit_continues(tmp_path):
    settings = EnvSection(id="ALE/Breakout-v5", preset="atari", sticky_actions=0.25, max_episode_steps=90,
                          frame_stack=2, noop_max=10)
    random = np.random.default_rng(4)
    original = make_env(settings, seed=21)
    original.reset()
    run(original, random.integers(original.num_actions, size=50))
    copy = restored(original, settings, tmp_path)
    after = step_both(original, copy, random.integers(original.num_actions, size=400))
    assert any(step.truncated for step in after)
    assert all(step.episode.length <= 90 for step in after if step.done)
    assert after[0].observation.shape == (2, 84, 84)
    original.close()
    copy.close()


def test_breakout_rewards_lives_and_episode_results():
    random = np.random.default_rng(5)
    env = make_env(BREAKOUT, seed=1)
    env.reset()
    steps = []
    while not (steps and steps[-1].done):
        steps.append(env.step(int(random.integers(env.num_actions))))
    assert steps[-1].episode.raw_return == sum(step.raw_reward for step in steps)
    assert steps[-1].episode.length == len(steps)
    assert all(step.reward == np.sign(step.raw_reward) for step in steps)
    assert {step.reward for step in steps} <= {-1.0, 0.0, 1.0}
    life_losses = [step for step in steps if step.terminal and not step.done]
    assert len(life_losses) == 4  # five lives: four end the episode for learning only, the fifth the game
    assert all(step.episode is None for step in life_losses)
    assert steps[-1].terminal and not steps[-1].truncated
    assert np.array_equal(env.newest_frame(steps[-1].observation), steps[-1].observation[-1])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.close()


def test_render_and_probe_agree_with_the_env():
    env = make_env(BREAKOUT, seed=0, render_mode="rgb_array")
    observation = env.reset()
    assert env.render().shape == (210, 160, 3)
    assert probe_env(BREAKOUT) == (observation.shape, observation.dtype, env.num_actions, 4)
    assert env.frame_shape == (84, 84) and env.observation_shape == (4, 84, 84)
    assert probe_env(EnvSection(id="CartPole-v1")) == ((4,), np.dtype(np.float32), 2, 1)
    env.close()


@pytest.mark.parametrize("settings, message", [
    (EnvSection(id="NoSuchGame-v0"), "unknown env id 'NoSuchGame-v0'"),
    (EnvSection(id="CartPole-v1", preset="atari"), "'CartPole-v1' is not an Atari"),
    (EnvSection(id="ALE/Pong-v5"), "'ALE/Pong-v5' is an Atari game"),
])
def test_bad_ids_are_refused_by_name(settings, message):
    with pytest.raises(EnvError, match=message):
        make_env(settings, seed=0)


def test_a_state_from_other_settings_is_refused():
    state = make_env(EnvSection(id="CartPole-v1"), seed=0).state_dict()
    with pytest.raises(EnvError, match="settings"):
        make_env(EnvSection(id="CartPole-v1", max_episode_steps=50), seed=0).load_state_dict(state)
