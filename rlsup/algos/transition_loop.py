"""What the trainers on transition replays (DQN, SAC) share: each env's step stored, and unreplayable episodes ended."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlsup.algos.envs.capture import EnvRestart
from rlsup.algos.envs.vector import VectorEnv, VectorStep
from rlsup.algos.episodes import EpisodeReturns
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.replay.mixer import ReplayMixer
from rlsup.run.metrics import EPISODE, EPISODE_LENGTH, EPISODE_RETURN, KIND, STEP


class TransitionLoop:
    """A trainer's envs feeding its replays; the subclass sets the attributes below."""

    envs: VectorEnv
    replays: ReplayMixer
    returns: EpisodeReturns
    observations: np.ndarray
    first: list[bool]
    step: int
    exploration: np.random.Generator
    env_restarts: tuple[str, ...] = ()

    def _store(self, index: int, action: Any, result: VectorStep, features: Any = None,
               values: Any = None) -> dict | None:
        """One env's transition into the replays (in env order, as the samplers' streams expect); the episode
        record when it ended."""
        self.replays.add_step(index, self.envs.newest_frame(self.observations[index]), action,
                              float(result.rewards[index]), bool(result.terminals[index]), self.first[index],
                              features, values)
        self.first[index] = False
        episode = result.episodes.get(index)
        if episode is None:
            return None
        self.replays.add_final(index, self.envs.newest_frame(result.final_observations[index]))
        self.first[index] = True
        self.returns.add(episode.raw_return)
        return {KIND: EPISODE, STEP: self.step + index + 1, EPISODE_RETURN: episode.raw_return,
                EPISODE_LENGTH: episode.length}

    def _start_fresh_episodes(self, restarts: list[EnvRestart], *, replay_loaded: bool) -> None:
        """Envs whose saved episode could not be replayed: it ends at its saved observation, cut as a time
        limit would cut it (bootstrapped, not terminal), and the env acts on its fresh episode."""
        for restart in restarts:
            if replay_loaded and not self.first[restart.index]:
                self.replays.add_final(restart.index, self.envs.newest_frame(self.observations[restart.index]))
            self.observations[restart.index] = restart.observation
            self.first[restart.index] = True
        self.env_restarts = tuple(restart.reason for restart in restarts)

    def _loop_state(self, include_replay: bool) -> dict:
        """Everything but the learner and its losses, for the trainer's checkpoint: the streams, counters, envs
        mid-episode, what the trainer acts on next, and (include_replay) the replays."""
        state = {"exploration": generator_state(self.exploration), "counters": {"step": self.step},
                 "episodes": self.returns.state_dict(), "envs": self.envs.state_dict(),
                 "observations": self.observations.copy(), "first": list(self.first)}
        if include_replay:
            state["replay"] = self.replays.state_dict()
        return state

    def _load_loop_state(self, state: dict) -> list[EnvRestart]:
        """_loop_state's part of a checkpoint back; the envs whose saved episode could not be replayed, for
        _start_fresh_episodes once the learner is loaded too."""
        self.exploration = restore_generator(state["exploration"])
        self.step = int(state["counters"]["step"])
        self.returns.load_state_dict(state["episodes"])
        restarts = self.envs.load_state_dict(state["envs"])
        self.observations = np.array(state["observations"], dtype=self.envs.observation_dtype)
        self.first = [bool(flag) for flag in state["first"]]
        if "replay" in state:
            self.replays.load_state_dict(state["replay"])
        return restarts
