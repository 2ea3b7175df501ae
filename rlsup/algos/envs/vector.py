"""Vectorisers: N training envs stepped as one batch, so the policy runs once per batch, each env's state captured."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.capture import EnvRestart, load_env_states
from rlsup.algos.envs.training import EpisodeResult, TrainingEnv


@dataclass(frozen=True)
class VectorStep:
    """One agent step of every env in a vector; arrays are indexed by env."""

    observations: np.ndarray                   # [N, *obs] what each env acts on next: a new episode's first if done
    rewards: np.ndarray                        # [N] float64 learning rewards (sign-clipped when clip_rewards)
    terminals: np.ndarray                      # [N] bool: cut the bootstrap (game over, or a lost life)
    dones: np.ndarray                          # [N] bool: the episode ended and the env was reset
    truncated: np.ndarray                      # [N] bool: ended by a time limit, not by the game
    final_observations: dict[int, np.ndarray]  # the last observation of each env whose episode ended
    episodes: dict[int, EpisodeResult]         # each finished episode, by env


class VectorEnv(Protocol):
    """N envs of one [env] section, stepped together and auto-reset when an episode ends.

    The checkpoint contract is per env: state_dict() maps each env's index (as a string) to its own
    TrainingEnv state, so a vector resumes bit for bit whatever steps it, and a checkpoint keeps the
    layout it had when trainers held a plain list of envs.
    """

    num_envs: int
    observation_shape: tuple
    observation_dtype: np.dtype
    frame_shape: tuple
    stack_size: int
    actions: ActionSpace  # every env's: Discrete(n), or a Box vector with finite bounds
    num_actions: int      # actions.count

    def reset(self) -> np.ndarray:
        """Start every env's first episode; the [N, *obs] observations."""
        ...

    def step(self, actions: np.ndarray) -> VectorStep:
        """actions: [N] ints for discrete actions, [N, actions.count] floats for continuous ones."""
        ...

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of one env's observation, as the replay stores it."""
        ...

    def state_dict(self) -> dict:
        ...

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        """Restore every env; those whose saved episode did not replay exactly have started a fresh one,
        and come back with its first observation (see env_capture.load_env_states)."""
        ...

    def close(self) -> None:
        ...


def check_env_count(state: dict, num_envs: int) -> None:
    """Refuse a saved vector state of another number of envs."""
    if len(state) != num_envs:
        raise ValueError(f"the saved state holds {len(state)} envs, this vector steps {num_envs}")


class SerialVectorEnv:
    """The envs stepped one after another in this process: exact for every env rlsup can capture.

    Envs are independent (each draws from its own generators), so stepping them all before any
    reset gives each the same trajectory as stepping and resetting them one at a time.
    """

    def __init__(self, envs: list[TrainingEnv], first_index: int = 0) -> None:
        """first_index: the number of the first env in state_dict keys, where these envs are a slice of a
        larger vector (the subprocess vectoriser's)."""
        if not envs:
            raise ValueError("a vector needs at least one env")
        self.envs = envs
        self.first_index = first_index
        first = envs[0]
        self.num_envs = len(envs)
        self.observation_shape = first.observation_shape
        self.observation_dtype = first.observation_dtype
        self.frame_shape = first.frame_shape
        self.stack_size = first.stack_size
        self.actions = first.actions
        self.num_actions = first.num_actions

    def reset(self) -> np.ndarray:
        return np.stack([env.reset() for env in self.envs])

    def step(self, actions: np.ndarray) -> VectorStep:
        count = self.num_envs
        observations = []
        rewards = np.zeros(count, np.float64)
        terminals, dones, truncated = (np.zeros(count, bool) for _ in range(3))
        final_observations, episodes = {}, {}
        for index, (env, action) in enumerate(zip(self.envs, actions)):
            result = env.step(action)
            rewards[index], terminals[index] = result.reward, result.terminal
            dones[index], truncated[index] = result.done, result.truncated
            if result.done:
                final_observations[index] = result.observation
                episodes[index] = result.episode
                observations.append(env.reset())
            else:
                observations.append(result.observation)
        return VectorStep(np.stack(observations), rewards, terminals, dones, truncated, final_observations, episodes)

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        return self.envs[0].newest_frame(observation)

    def state_dict(self) -> dict:
        return {str(index): env.state_dict() for index, env in enumerate(self.envs, start=self.first_index)}

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        check_env_count(state, self.num_envs)
        return load_env_states(self.envs, state, self.first_index)

    def close(self) -> None:
        for env in self.envs:
            env.close()
