"""DQN's learner: online and target Q-networks, their optimizer, the TD targets, and the copy that acts."""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from rlsup.algos.nets import fingerprint, gradient_step
from rlsup.algos.optimizers import FusedAdam, RMSprop
from rlsup.algos.schedules import LinearSchedule
from rlsup.replay.storage import TransitionBatch
from rlsup.spec import DqnSection


def td_targets(returns: torch.Tensor, discounts: torch.Tensor, next_target_q: torch.Tensor,
               next_online_q: torch.Tensor | None) -> torch.Tensor:
    """y = R + discount * Q_target(s', a*), a* from the online net (double DQN) or the target net."""
    chooser = next_online_q if next_online_q is not None else next_target_q
    best_actions = chooser.argmax(dim=1, keepdim=True)
    return returns + discounts * next_target_q.gather(1, best_actions).squeeze(1)


def optimizer_of(settings: DqnSection, parameters) -> FusedAdam | RMSprop:
    """The optimizer [dqn] names. Adam is the fused kernel, about twice as fast per step as the loop over tensors."""
    if settings.optimizer == "rmsprop":
        return RMSprop(parameters, lr=settings.lr, alpha=settings.rmsprop_alpha, eps=settings.rmsprop_eps,
                       centered=settings.rmsprop_centered)
    return FusedAdam(parameters, lr=settings.lr)


class DqnLearner:
    """Online and target Q-networks with their optimizer; one call of update() is one gradient step."""

    def __init__(self, settings: DqnSection, network: nn.Module, device: torch.device):
        self.settings = settings
        self.device = device
        self.online = network.to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.optimizer = optimizer_of(settings, self.online.parameters())
        # Absolute steps: a raised budget leaves the learning rate of the steps already taken alone.
        self.learning_rate = (LinearSchedule(settings.lr, settings.lr_end, settings.lr_end_step)
                              if settings.lr_end_step > 0 else LinearSchedule.constant(settings.lr))
        self.updates = 0
        # With overlap a copy acts while the online net trains; it catches up where the schedule closes a round.
        self.acting = ActingNetwork(self.online) if settings.overlap else None

    @property
    def acting_network(self) -> nn.Module:
        return self.acting.module if self.acting is not None else self.online

    @torch.no_grad()
    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        values = self.acting_network(torch.as_tensor(observations, device=self.device))
        return values.argmax(dim=1).cpu().numpy()

    @torch.no_grad()
    def features_and_values(self, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Penultimate features and Q-values of the acting net, from one pass through its torso."""
        network = self.acting_network
        features = network.features(torch.as_tensor(observations, device=self.device))
        values = network.head(features)
        return features.float().cpu().numpy(), values.float().cpu().numpy()

    def update(self, batch: TransitionBatch, step: int) -> dict[str, torch.Tensor]:
        """One gradient step at the learning rate of absolute env step `step`; its loss and mean Q on the device."""
        observations = self._tensor(batch.observations)
        next_observations = self._tensor(batch.next_observations)
        actions = self._tensor(batch.actions).long().unsqueeze(1)
        if self.settings.double:
            # One forward pass over both halves is cheaper than two; the next-state half carries no gradient.
            both = self.online(torch.cat([observations, next_observations]))
            q_values, next_online_q = both[: len(actions)], both[len(actions):].detach()
        else:
            q_values, next_online_q = self.online(observations), None
        with torch.no_grad():
            targets = td_targets(self._tensor(batch.returns), self._tensor(batch.discounts),
                                 self.target(next_observations), next_online_q)
        chosen = q_values.gather(1, actions).squeeze(1)
        loss = self._loss(chosen, targets)
        gradient_step(self.optimizer, loss, self.online.parameters(), learning_rate=self.learning_rate(step),
                      max_grad_norm=self.settings.max_grad_norm)
        self.updates += 1
        return {"loss": loss.detach(), "q_mean": chosen.detach().mean()}

    def _loss(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        if self.settings.loss == "huber":
            return functional.smooth_l1_loss(predictions, targets)
        return functional.mse_loss(predictions, targets)

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array).to(self.device, non_blocking=True)

    def fingerprint(self) -> str:
        return fingerprint(self.online)

    @torch.no_grad()
    def update_target(self) -> None:
        tau = self.settings.tau
        if tau >= 1.0:
            self.target.load_state_dict(self.online.state_dict())
            return
        for target, online in zip(self.target.parameters(), self.online.parameters()):
            target.lerp_(online, tau)

    def state_dict(self) -> dict:
        return {"online": self.online.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        if self.acting is not None:
            self.acting.sync()


class ActingNetwork:
    """A copy of the online network that chooses actions while the online one takes gradient steps.

    It holds the learner's parameters as of the last sync, which the trainer makes where its schedule
    closes a round: until then the envs act with the network from before the round.
    """

    def __init__(self, online: nn.Module) -> None:
        self.online = online
        self.module = copy.deepcopy(online).requires_grad_(False)

    @torch.no_grad()
    def sync(self) -> None:
        for acting, learning in zip(self.module.state_dict().values(), self.online.state_dict().values()):
            acting.copy_(learning)
