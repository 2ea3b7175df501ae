"""Training environments whose whole state is captured mid-episode and restored bit for bit."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import ale_py
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.spaces import Box, Discrete
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from rlsup.algos.env_capture import EnvError, capture_state, choose_capture, restore_state
from rlsup.algos.env_replay import ReplayMismatch
from rlsup.algos.fire_reset import FireReset, needs_fire
from rlsup.spec import EnvSection

gym.register_envs(ale_py)

ATARI_SCREEN_SIZE = 84
ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"


@dataclass(frozen=True)
class EpisodeResult:
    """A finished game: its unclipped score over every life and its length in agent steps."""

    raw_return: float
    length: int


@dataclass(frozen=True)
class EnvStep:
    """What one agent step returns."""

    observation: np.ndarray        # next observation; for Atari the (stack, 84, 84) uint8 stack
    reward: float                  # learning reward: sign-clipped when clip_rewards
    raw_reward: float              # the game's own reward
    terminal: bool                 # cut the bootstrap: game over, or a lost life when episodic_life
    done: bool                     # the episode is over (terminated or truncated): call reset()
    truncated: bool                # cut by a time limit, not by the game
    episode: EpisodeResult | None  # set when done


def make_env(env: EnvSection, *, seed: int, render_mode: str | None = None) -> TrainingEnv:
    """The env an [env] section describes; its first reset is seeded with seed."""
    _check_preset(env, _registered_spec(env.id))
    try:
        stack = _make_atari(env, render_mode) if env.preset == "atari" else _make_classic(env, render_mode)
    except gym.error.Error as error:
        raise EnvError(f"cannot make env {env.id!r}: {error}") from error
    try:
        _check_spaces(env, stack)
    except EnvError:
        stack.close()
        raise
    return TrainingEnv(stack, env, seed, render_mode)


@functools.lru_cache(maxsize=16)
def probe_env(env: EnvSection) -> tuple[tuple, np.dtype, int, int]:
    """Observation shape, observation dtype, number of actions and stack size, for building networks."""
    training_env = make_env(env, seed=0)
    try:
        return (training_env.observation_shape, training_env.observation_dtype,
                training_env.num_actions, training_env.stack_size)
    finally:
        training_env.close()


def _registered_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    try:
        return gym.spec(env_id)
    except gym.error.Error as error:
        raise EnvError(f"unknown env id {env_id!r}: {error}") from None


def _check_preset(env: EnvSection, spec: gym.envs.registration.EnvSpec) -> None:
    is_atari = spec.entry_point in (ATARI_ENTRY_POINT, AtariEnv)
    if env.preset == "atari" and not is_atari:
        raise EnvError(f"env id {env.id!r} is not an Atari (ALE) game, so preset \"atari\" does not fit it; "
                       f"use preset = \"classic\"")
    if env.preset == "classic" and is_atari:
        raise EnvError(f"env id {env.id!r} is an Atari game: use preset = \"atari\"")


def _make_classic(env: EnvSection, render_mode: str | None) -> gym.Env:
    options = _render_option(render_mode)
    if env.max_episode_steps > 0:
        options["max_episode_steps"] = env.max_episode_steps
    # The passive checker only warns, yet it keeps check-once flags and the previous step's data,
    # state that would have to be captured too.
    return gym.make(env.id, disable_env_checker=True, **options)


def _make_atari(env: EnvSection, render_mode: str | None) -> gym.Env:
    # ALE counts the limit in emulator frames, reset no-ops included, as the 108,000-frame convention does.
    options = _render_option(render_mode)
    if env.max_episode_steps > 0:
        options["max_num_frames_per_episode"] = env.max_episode_steps * env.frame_skip
    # AtariPreprocessing reads the screen from ALE itself and drops the game's own per-frame observation,
    # so ask for the cheapest screen copy that keeps its buffers' (210, 160) shape: ~10% faster than RGB.
    game = gym.make(env.id, frameskip=1, repeat_action_probability=env.sticky_actions,
                    full_action_space=False, obs_type="grayscale", disable_env_checker=True, **options)
    # Life loss is handled by TrainingEnv so that it ends the episode for learning only.
    preprocessed = AtariPreprocessing(game, noop_max=env.noop_max, frame_skip=env.frame_skip,
                                      screen_size=ATARI_SCREEN_SIZE, grayscale_obs=True, scale_obs=False,
                                      terminal_on_life_loss=False)
    if env.fire_reset and needs_fire(game):
        preprocessed = FireReset(preprocessed)
    # "reset" padding: the replay rebuilds stacks after a reset by repeating the reset frame.
    return FrameStackObservation(preprocessed, env.frame_stack, padding_type="reset")


def _render_option(render_mode: str | None) -> dict:
    # gym.make hands render_mode to the env's constructor even when None, which some envs do not take.
    return {} if render_mode is None else {"render_mode": render_mode}


def _check_spaces(env: EnvSection, stack: gym.Env) -> None:
    actions = stack.action_space
    if not isinstance(actions, Discrete) or int(actions.start) != 0:
        raise EnvError(f"env id {env.id!r} has the action space {actions}; rlsup needs Discrete(n) from 0")
    observations = stack.observation_space
    if env.preset == "classic" and not (isinstance(observations, Box) and len(observations.shape) == 1):
        raise EnvError(f"env id {env.id!r} has the observation space {observations}; "
                       f"preset \"classic\" needs a one-dimensional Box")


class TrainingEnv:
    """One environment as the learner sees it: clipped rewards, life-loss terminals, capturable state."""

    def __init__(self, stack: gym.Env, env: EnvSection, seed: int, render_mode: str | None) -> None:
        self._stack = stack
        self._settings = env
        self._is_atari = env.preset == "atari"
        self._render_mode = render_mode
        self._pending_seed: int | None = int(seed)  # consumed by the first reset
        self._needs_reset = True
        self._raw_return = 0.0
        self._length = 0
        self._lives = 0
        self._capture = choose_capture(stack, env.id, int(seed))
        self.observation_shape: tuple = tuple(stack.observation_space.shape)
        self.observation_dtype = np.dtype(np.uint8 if self._is_atari else np.float32)
        self.stack_size = env.frame_stack if self._is_atari else 1
        self.frame_shape: tuple = self.observation_shape[1:] if self._is_atari else self.observation_shape
        self.num_actions = int(stack.action_space.n)

    def reset(self) -> np.ndarray:
        """Start a new episode, seeded as the env's state capture needs (see StateCapture.reset_seed)."""
        seed, self._pending_seed = self._capture.reset_seed(self._pending_seed), None
        observation, info = self._stack.reset(seed=seed)
        self._capture.record_reset(seed, observation, info)
        self._needs_reset = False
        self._raw_return, self._length = 0.0, 0
        self._lives = self._game_lives()
        return self._observation(observation)

    def step(self, action: int) -> EnvStep:
        """One agent step (frame_skip emulator frames for Atari)."""
        if self._needs_reset:
            raise RuntimeError(f"{self._settings.id}: call reset() first (the episode is over or never began)")
        observation, raw_reward, terminated, truncated, info = self._stack.step(int(action))
        self._capture.record_step(int(action), observation, info, bool(terminated or truncated))
        raw_reward = float(raw_reward)
        self._raw_return += raw_reward
        self._length += 1
        lives = self._game_lives()
        life_lost, self._lives = lives < self._lives, lives
        done = bool(terminated or truncated)
        episode = None
        if done:
            self._needs_reset = True
            episode = EpisodeResult(raw_return=self._raw_return, length=self._length)
        reward = float(np.sign(raw_reward)) if self._settings.clip_rewards else raw_reward
        terminal = bool(terminated) or (self._settings.episodic_life and life_lost)
        return EnvStep(observation=self._observation(observation), reward=reward, raw_reward=raw_reward,
                       terminal=terminal, done=done, truncated=bool(truncated), episode=episode)

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of an observation: the top of an Atari stack, a vector itself."""
        return observation[-1] if self._is_atari else observation

    def render(self) -> np.ndarray | None:
        """The screen as RGB when made with render_mode="rgb_array", else None."""
        if self._render_mode != "rgb_array":
            return None
        return np.asarray(self._stack.render())

    def close(self) -> None:
        self._stack.close()

    def state_dict(self) -> dict:
        """Everything needed to continue this env bit for bit, as a tree of plain values and arrays."""
        return {
            **capture_state(self._capture, self._stack, self._settings),
            "episode": {"pending_seed": self._pending_seed, "needs_reset": self._needs_reset,
                        "raw_return": self._raw_return, "length": self._length, "lives": self._lives},
        }

    def load_state_dict(self, state: dict) -> ReplayMismatch | None:
        """Continue from a state_dict taken from an env made with the same settings; no reset needed.

        Where replaying the saved episode's actions does not reproduce it (a non-deterministic env),
        returns the mismatch and leaves the env waiting for reset(): a fresh episode, never a wrong one.
        """
        mismatch = restore_state(self._capture, self._stack, self._settings, state)
        if mismatch is not None:
            self._pending_seed, self._needs_reset = None, True
            self._raw_return, self._length, self._lives = 0.0, 0, 0
            return mismatch
        episode = state["episode"]
        pending_seed = episode["pending_seed"]
        self._pending_seed = None if pending_seed is None else int(pending_seed)
        self._needs_reset = bool(episode["needs_reset"])
        self._raw_return = float(episode["raw_return"])
        self._length = int(episode["length"])
        self._lives = int(episode["lives"])
        return None

    def _game_lives(self) -> int:
        return int(self._stack.unwrapped.ale.lives()) if self._is_atari else 0

    def _observation(self, observation: Any) -> np.ndarray:
        if self._is_atari:
            return observation  # FrameStackObservation hands out a fresh copy each step
        return np.array(observation, dtype=np.float32)
