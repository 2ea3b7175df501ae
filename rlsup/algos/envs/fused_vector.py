"""A fused game as a vectoriser: its batch stepped as one and handed over as numpy, for the trainers on replays (DQN)."""
from __future__ import annotations

import numpy as np
import torch

from rlsup.algos.envs.capture import EnvRestart
from rlsup.algos.envs.fused import CheckedGame
from rlsup.algos.envs.training import EpisodeResult
from rlsup.algos.envs.vector import VectorStep


class FusedVectorEnv:
    """A VectorEnv of one CheckedGame's num_envs games: the game steps its whole batch in one call, and each step's
    arrays are copied to the host, where a transition replay keeps them.

    The game is its own vectoriser and its own state capture: state_dict() is the game's whole state beside the
    episodes in progress, so a resume is exact and never restarts an episode (load_state_dict returns no restart).
    Unlike VectorEnv's other vectorisers, that state is one part for the batch, not one per env.
    """

    def __init__(self, game: CheckedGame, clip_rewards: bool) -> None:
        self.game, self.clip_rewards = game, clip_rewards
        self.num_envs = game.num_envs
        self.observation_shape = game.observation_shape
        self.observation_dtype = np.dtype(torch.empty(0, dtype=game.observation_dtype).numpy().dtype)
        self.frame_shape, self.stack_size = self.observation_shape, 1
        self.actions, self.num_actions = game.actions, game.actions.count
        self.episode_returns = np.zeros(self.num_envs, np.float64)  # unclipped, as EpisodeResult's raw_return
        self.episode_lengths = np.zeros(self.num_envs, np.int64)

    def reset(self) -> np.ndarray:
        return host(self.game.reset())

    def step(self, actions: np.ndarray) -> VectorStep:
        result = self.game.step(torch.as_tensor(np.asarray(actions), dtype=torch.int64).to(self.game.device))
        self.game.check_rewards(result.rewards)
        rewards = host(result.rewards).astype(np.float64)
        terminations, truncations = host(result.terminations), host(result.truncations)
        dones = terminations | truncations
        self.episode_returns += rewards
        self.episode_lengths += 1
        ended = np.flatnonzero(dones)
        finals = host(result.final_observations) if ended.size else None
        final_observations = {int(index): finals[index] for index in ended}
        episodes = {int(index): EpisodeResult(float(self.episode_returns[index]), int(self.episode_lengths[index]))
                    for index in ended}
        self.episode_returns[ended], self.episode_lengths[ended] = 0.0, 0
        # A fused game has no lives: the bootstrap is cut where the game ended, not where a time limit cut it.
        return VectorStep(host(result.observations), np.sign(rewards) if self.clip_rewards else rewards,
                          terminations, dones, truncations, final_observations, episodes)

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        return observation  # no frame stack: an observation is one frame

    def state_dict(self) -> dict:
        return {"games": self.game.state_dict(), "episode_returns": self.episode_returns.copy(),
                "episode_lengths": self.episode_lengths.copy()}

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        returns, lengths = (np.asarray(state[name]) for name in ("episode_returns", "episode_lengths"))
        if returns.shape != (self.num_envs,) or lengths.shape != (self.num_envs,):
            raise ValueError(f"the saved state holds {returns.shape} episodes in progress, this vector steps "
                             f"{self.num_envs} games")
        self.game.load_state_dict(state["games"])
        self.episode_returns, self.episode_lengths = returns.astype(np.float64), lengths.astype(np.int64)
        return []

    def close(self) -> None:
        self.game.close()


def host(tensor: torch.Tensor) -> np.ndarray:
    """A tensor as a numpy array of its own: the game may write its next step into the memory it handed out."""
    return tensor.detach().to("cpu", copy=True).numpy()
