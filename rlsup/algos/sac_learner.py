"""SAC's learner: the policy, twin critics and their targets, the tuned temperature, and one gradient step."""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

from rlsup.algos.nets import fingerprint, gradient_step
from rlsup.algos.optimizers import FusedAdam
from rlsup.algos.sac_networks import SquashedGaussianPolicy, Temperature, TwinQ
from rlsup.replay.storage import TransitionBatch
from rlsup.spec import SacSection

# The scalars each gradient step reports: the critics' loss is the algorithm's loss (registry's loss_metric).
LOSS_NAMES = ("q_loss", "policy_loss", "temperature", "entropy", "q_mean")


class SacParameters(nn.Module):
    """What a SAC run learns, in one module: its fingerprint and its export read the same names."""

    def __init__(self, policy: SquashedGaussianPolicy, critic: TwinQ, temperature: Temperature):
        super().__init__()
        self.policy, self.critic, self.temperature = policy, critic, temperature


class SacLearner:
    """One update() is one critic step, and on the policy schedule the policy's and the temperature's steps.

    Every random draw of a step (the next actions of the targets, the policy's actions) comes from
    self.noise, a generator of the learner's own, so that a checkpoint holds where the run is.
    """

    def __init__(self, settings: SacSection, parameters: SacParameters, action_size: int, device: torch.device,
                 seed: int):
        self.settings = settings
        self.device = device
        self.parameters = parameters.to(device)
        self.policy, self.critic, self.temperature = parameters.policy, parameters.critic, parameters.temperature
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.policy_optimizer = FusedAdam(self.policy.parameters(), lr=settings.lr_actor)
        self.critic_optimizer = FusedAdam(self.critic.parameters(), lr=settings.lr_critic)
        self.temperature_optimizer = FusedAdam(self.temperature.parameters(), lr=settings.lr_temperature)
        self.target_entropy = -settings.target_entropy_scale * action_size
        self.noise = torch.Generator(device=device)
        self.noise.manual_seed(seed)
        self.updates = 0
        self.last_policy_losses: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        return self.policy(self._tensor(observations)).cpu().numpy()

    @torch.no_grad()
    def sampled_actions(self, observations: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The exploring policy's actions for the given standard-normal noise (the trainer's own stream), and the
        policy torso's features they came from, in one pass of the torso."""
        features = self.policy.features(self._tensor(observations))
        actions, _ = self.policy.sample_from_features(features, self._tensor(noise))
        return actions.cpu().numpy(), features.float().cpu().numpy()

    @torch.no_grad()
    def features(self, observations: np.ndarray) -> np.ndarray:
        """The policy torso's features, which elite and attentive replay compare."""
        return self.policy.features(self._tensor(observations)).float().cpu().numpy()

    def update(self, batch: TransitionBatch) -> dict[str, torch.Tensor]:
        """One critic step; on every policy_every-th, policy_every policy and temperature steps (TD3's delay,
        with as many policy steps in all as critic steps); then the targets move by tau."""
        observations = self._tensor(batch.observations)
        actions = self._tensor(batch.actions)
        losses = self._critic_step(observations, actions, batch)
        if self.updates % self.settings.policy_every == 0:
            for _ in range(self.settings.policy_every):
                self.last_policy_losses = self._policy_step(observations)
        self._move_targets()
        self.updates += 1
        return losses | self.last_policy_losses

    def _critic_step(self, observations: torch.Tensor, actions: torch.Tensor,
                     batch: TransitionBatch) -> dict[str, torch.Tensor]:
        next_observations = self._tensor(batch.next_observations)
        with torch.no_grad():
            next_actions, next_log_probabilities = self.policy.sample(next_observations, self._noise(len(actions)))
            next_values = self.target(next_observations, next_actions).min(dim=0).values
            soft_values = next_values - self.temperature() * next_log_probabilities
            targets = self._tensor(batch.returns) + self._tensor(batch.discounts) * soft_values
        values = self.critic(observations, actions)
        # Each critic's mean squared error, summed over the two (CleanRL's qf1_loss + qf2_loss).
        loss = (values - targets).square().mean(dim=1).sum()
        gradient_step(self.critic_optimizer, loss, self.critic.parameters(), learning_rate=self.settings.lr_critic,
                      max_grad_norm=self.settings.max_grad_norm)
        return {"q_loss": loss.detach(), "q_mean": values.detach().mean()}

    def _policy_step(self, observations: torch.Tensor) -> dict[str, torch.Tensor]:
        self.critic.requires_grad_(False)  # the policy's loss moves the policy only: no critic gradients made
        try:
            actions, log_probabilities = self.policy.sample(observations, self._noise(len(observations)))
            values = self.critic(observations, actions).min(dim=0).values
            loss = (self.temperature().detach() * log_probabilities - values).mean()
        finally:
            self.critic.requires_grad_(True)
        gradient_step(self.policy_optimizer, loss, self.policy.parameters(), learning_rate=self.settings.lr_actor,
                      max_grad_norm=self.settings.max_grad_norm)
        entropy = -log_probabilities.detach().mean()
        if self.settings.autotune:
            # The entropy of the step's own actions, before the policy moved: one draw fewer than CleanRL's.
            temperature_loss = self.temperature.log_alpha.exp() * (entropy - self.target_entropy)
            gradient_step(self.temperature_optimizer, temperature_loss, self.temperature.parameters(),
                          learning_rate=self.settings.lr_temperature, max_grad_norm=0.0)
        return {"policy_loss": loss.detach(), "temperature": self.temperature().detach(), "entropy": entropy}

    @torch.no_grad()
    def _move_targets(self) -> None:
        torch._foreach_lerp_(list(self.target.parameters()), list(self.critic.parameters()), self.settings.tau)

    def _noise(self, rows: int) -> torch.Tensor:
        """Standard-normal noise for rows actions, from the learner's own generator."""
        size = self.policy.action_scale.shape[0]
        return torch.randn((rows, size), generator=self.noise, device=self.device)

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array).to(self.device, non_blocking=True)

    def fingerprint(self) -> str:
        """Of the policy, the critics, their targets and the temperature: everything a resume must restore."""
        return fingerprint(nn.ModuleDict({"learned": self.parameters, "target": self.target}))

    def state_dict(self) -> dict:
        return {"parameters": self.parameters.state_dict(), "target": self.target.state_dict(),
                "policy_optimizer": self.policy_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(),
                "temperature_optimizer": self.temperature_optimizer.state_dict(),
                "noise": self.noise.get_state(), "updates": self.updates,
                "last_policy_losses": {name: float(value) for name, value in self.last_policy_losses.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.parameters.load_state_dict(state["parameters"])
        self.target.load_state_dict(state["target"])
        self.policy_optimizer.load_state_dict(state["policy_optimizer"])
        self.critic_optimizer.load_state_dict(state["critic_optimizer"])
        self.temperature_optimizer.load_state_dict(state["temperature_optimizer"])
        self.noise.set_state(state["noise"])
        self.updates = int(state["updates"])
        self.last_policy_losses = {name: torch.tensor(value, device=self.device)
                                   for name, value in state["last_policy_losses"].items()}
