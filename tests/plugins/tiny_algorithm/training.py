"""The tiny algorithm's trainer: online one-step Q-learning with a small torch net on one env, no replay."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlsup.algos.contract import LearnerTrainer, Policy
from rlsup.algos.envs.training import make_env, probe_env
from rlsup.algos.episodes import EpisodeReturns
from rlsup.algos.nets import cpu_greedy_policy, fingerprint
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.spec import JobSpec

LEARNING_RATE = 0.01
MOMENTUM = 0.9  # optimizer state that a checkpoint must carry for the resume to be exact
GAMMA = 0.99
EPSILON = 0.1
HIDDEN_SIZE = 16


def build_network(observation_shape: tuple, num_actions: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(observation_shape)), HIDDEN_SIZE), nn.Tanh(),
                         nn.Linear(HIDDEN_SIZE, num_actions))


class TinyLearner:
    """A Q-network and SGD with momentum; one update() is one TD(0) step on one transition."""

    def __init__(self, network: nn.Module, device: torch.device):
        self.device = device
        self.network = network.to(device)
        self.optimizer = torch.optim.SGD(self.network.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)

    def _values(self, observations: np.ndarray) -> torch.Tensor:
        return self.network(torch.as_tensor(observations, dtype=torch.float32, device=self.device))

    @torch.no_grad()
    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        return self._values(observations).argmax(dim=1).cpu().numpy()

    def fingerprint(self) -> str:
        return fingerprint(self.network)

    def update(self, observation: np.ndarray, action: int, reward: float, next_observation: np.ndarray,
               terminal: bool) -> float:
        value = self._values(observation[None])[0, action]
        with torch.no_grad():
            bootstrap = 0.0 if terminal else GAMMA * self._values(next_observation[None]).max()
        loss = (value - (reward + bootstrap)) ** 2
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        return loss.item()


class TinyTrainer(LearnerTrainer):
    """One env step and one update per iterate(), epsilon-greedy from a random stream of its own."""

    def __init__(self, spec: JobSpec, device: torch.device):
        seeds = np.random.SeedSequence(spec.job.seed).spawn(2)
        self.env = make_env(spec.env, seed=int(seeds[0].generate_state(1)[0]))
        torch.manual_seed(spec.job.seed)
        self.learner = TinyLearner(build_network(self.env.observation_shape, self.env.num_actions), device)
        self.exploration = np.random.Generator(np.random.PCG64(seeds[1]))
        self.returns = EpisodeReturns()
        self.step = 0
        self.loss_sum, self.loss_count = 0.0, 0
        self.observation = self.env.reset()

    def iterate(self) -> list[dict]:
        # Both numbers are drawn every step, so the stream's use never depends on the network.
        explore = self.exploration.random() < EPSILON
        random_action = int(self.exploration.integers(self.env.num_actions))
        action = random_action if explore else int(self.learner.greedy_actions(self.observation[None])[0])
        result = self.env.step(action)
        self.loss_sum += self.learner.update(self.observation, action, result.reward, result.observation,
                                             result.terminal)
        self.loss_count += 1
        self.step += 1
        self.observation = result.observation
        if not result.done:
            return []
        self.observation = self.env.reset()
        self.returns.add(result.episode.raw_return)
        return [{"kind": "episode", "step": self.step, "return": result.episode.raw_return,
                 "length": result.episode.length}]

    def train_metrics(self) -> dict:
        metrics = {"episodes": self.episodes, "mean_return": self.mean_return()}
        if self.loss_count:
            metrics["td_loss"] = self.loss_sum / self.loss_count
        self.loss_sum, self.loss_count = 0.0, 0
        return metrics

    def state_dict(self, *, include_replay: bool = True) -> dict:
        state = {"learner": {"network": self.learner.network.state_dict(),
                             "optimizer": self.learner.optimizer.state_dict()},
                 "exploration": generator_state(self.exploration), "step": self.step,
                 "episodes": self.returns.state_dict(),
                 "metrics": {"loss_sum": self.loss_sum, "loss_count": self.loss_count},
                 "env": self.env.state_dict(), "observation": np.asarray(self.observation)}
        if include_replay:
            state["replay"] = {}  # it keeps none: an empty entry says nothing was left out
        return state

    def load_state_dict(self, state: dict) -> None:
        self.learner.network.load_state_dict(state["learner"]["network"])
        self.learner.optimizer.load_state_dict(state["learner"]["optimizer"])
        self.exploration = restore_generator(state["exploration"])
        self.step = int(state["step"])
        self.returns.load_state_dict(state["episodes"])
        self.loss_sum, self.loss_count = float(state["metrics"]["loss_sum"]), int(state["metrics"]["loss_count"])
        self.env.load_state_dict(state["env"])
        self.observation = np.array(state["observation"])

    def close(self) -> None:
        self.env.close()


def policy_from_checkpoint(spec: JobSpec, trainer_state: dict) -> Policy:
    observation_shape, _, num_actions, _ = probe_env(spec.env)
    return cpu_greedy_policy(build_network(observation_shape, num_actions), trainer_state["learner"]["network"])
