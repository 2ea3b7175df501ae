"""Training environments whose whole state is captured mid-episode and restored bit for bit."""
from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from rlsup.algos.envs.actions import ActionSpace, EnvActions
from rlsup.algos.envs.capture import capture_state, choose_capture, restore_state
from rlsup.algos.envs.faults import EnvChecks
from rlsup.algos.envs.action_replay import ReplayMismatch
from rlsup.algos.envs.sources import EnvDescription, EnvError, describe_env, make_stack, observation_layout
from rlsup.algos.envs.observations import ObservationLayout
from rlsup.spec import EnvSection

__all__ = ["EnvError", "EnvStep", "EpisodeResult", "TrainingEnv", "make_env", "probe_env"]


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
    return TrainingEnv(make_stack(env, render_mode), env, seed, render_mode)


def take_first_step(env: EnvSection) -> EnvDescription:
    """Make the env, reset it and take one step (action 0, or the middle of a Box's bounds), as a worker's
    first moments do, and close it: an env written for the old Gym API (a reset without seed, a step of four
    values), or one that returns what EnvChecks refuses from the start, is refused before a job is queued,
    not by its worker. Returns what describe_env would, from the same env: a check makes it once."""
    if env.source == "fused":
        return describe(env)  # made, reset and stepped once, on the CPU
    training_env = make_env(env, seed=0)
    try:
        training_env.reset()
        training_env.step(training_env.neutral_action())
        return EnvDescription(training_env.layout, training_env.actions)
    finally:
        training_env.close()


def describe(env: EnvSection) -> EnvDescription:
    """Observation layout and actions of an [env] section's games: gymnasium's (sources.describe_env), or a fused
    game's (fused.describe_fused), each made once per process."""
    if env.source == "fused":
        from rlsup.algos.envs.fused import describe_fused  # torch: a fused game's tensors

        return describe_fused(env)
    return describe_env(env)


def probe_env(env: EnvSection) -> tuple[tuple, np.dtype, int, int]:
    """Observation shape, observation dtype, number of actions and stack size, for building networks."""
    description = describe(env)
    layout = description.observation
    return layout.shape, layout.dtype, description.num_actions, layout.stack_size


class TrainingEnv:
    """One environment as the learner sees it: clipped rewards, life-loss terminals, capturable state."""

    def __init__(self, stack: gym.Env, env: EnvSection, seed: int, render_mode: str | None) -> None:
        self._stack = stack
        self._settings = env
        # Looked up once: reaching it through unwrapped walks the whole wrapper chain, each step.
        self._ale = stack.unwrapped.ale if env.preset == "atari" else None
        self._render_mode = render_mode
        self._pending_seed: int | None = int(seed)  # consumed by the first reset
        self._needs_reset = True
        self._raw_return = 0.0
        self._length = 0
        self._lives = 0
        self._actions = EnvActions(env.id, stack.action_space)
        self._capture = choose_capture(stack, env.id, int(seed), self._actions)
        # Every observation leaves in one layout: (stack, 84, 84) for Atari, float32 vectors, CHW images.
        self._layout = observation_layout(stack, env)
        self._checks = EnvChecks(env.id, stack.observation_space, self._layout, self._actions)
        self.observation_shape: tuple = self._layout.shape
        self.observation_dtype = self._layout.dtype
        self.stack_size = self._layout.stack_size
        self.frame_shape: tuple = self._layout.frame_shape
        self.actions: ActionSpace = self._actions.space
        self.num_actions = self.actions.count  # Discrete(n)'s n, or the length of a continuous action

    def reset(self) -> np.ndarray:
        """Start a new episode, seeded as the env's state capture needs (see StateCapture.reset_seed)."""
        seed, self._pending_seed = self._capture.reset_seed(self._pending_seed), None
        try:
            observation, info = self._stack.reset(seed=seed)
        except Exception as error:
            raise self._checks.raised("reset", error) from error
        converted = self._checks.observation(observation, None)
        self._capture.record_reset(seed, observation, info)
        self._needs_reset = False
        self._raw_return, self._length = 0.0, 0
        self._lives = self._game_lives()
        return converted

    def step(self, action: int | np.ndarray) -> EnvStep:
        """One agent step (frame_skip emulator frames for Atari): a discrete action's number, or a continuous
        action's vector, handed to the env in its Box's dtype within its bounds (ActionFault if not finite)."""
        if self._needs_reset:
            raise RuntimeError(f"{self._settings.id}: call reset() first (the episode is over or never began)")
        sent = self._checks.action(action, self._length)
        try:
            observation, raw_reward, terminated, truncated, info = self._stack.step(sent)
            raw_reward = float(raw_reward)
        except Exception as error:
            raise self._checks.raised("step", error) from error
        self._length += 1
        converted = self._checks.observation(observation, self._length)
        self._checks.reward(raw_reward, self._length)
        self._capture.record_step(sent, observation, info, bool(terminated or truncated))
        self._raw_return += raw_reward
        lives = self._game_lives()
        life_lost, self._lives = lives < self._lives, lives
        done = bool(terminated or truncated)
        episode = None
        if done:
            self._needs_reset = True
            episode = EpisodeResult(raw_return=self._raw_return, length=self._length)
        reward = float(np.sign(raw_reward)) if self._settings.clip_rewards else raw_reward
        terminal = bool(terminated) or (self._settings.episodic_life and life_lost)
        return EnvStep(observation=converted, reward=reward, raw_reward=raw_reward,
                       terminal=terminal, done=done, truncated=bool(truncated), episode=episode)

    def neutral_action(self) -> int | np.ndarray:
        """An action this env takes whatever its state: 0, or the middle of its Box's bounds."""
        return self._actions.neutral()

    @property
    def layout(self) -> ObservationLayout:
        """How this env's observations are laid out (what a vector in another process reports of it)."""
        return self._layout

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of an observation: the top of an Atari stack, anything else itself."""
        return self._layout.newest_frame(observation)

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
        return int(self._ale.lives()) if self._ale is not None else 0
