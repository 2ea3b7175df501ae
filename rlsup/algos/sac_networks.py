"""SAC's networks: a tanh-squashed Gaussian policy scaled into the action bounds, and twin Q-networks as one batch."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from rlsup.algos.nets import as_float, build_torso

# The policy's log standard deviation is squashed into this range (CleanRL's and the SAC authors' code).
LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
# Keeps the tanh Jacobian's logarithm finite where a squashed action reaches its bound.
JACOBIAN_EPSILON = 1e-6
HALF_LOG_TWO_PI = 0.5 * math.log(2 * math.pi)


class SquashedGaussianPolicy(nn.Module):
    """Observations to a diagonal Gaussian whose samples are squashed by tanh and scaled into [low, high].

    forward() is the deterministic policy (the squashed mean): what evaluation, enjoy and export play.
    """

    def __init__(self, torso: nn.Module, low: np.ndarray, high: np.ndarray):
        super().__init__()
        size = len(low)
        self.torso = torso
        self.mean = nn.Linear(torso.output_size, size)
        self.log_std = nn.Linear(torso.output_size, size)
        low, high = torch.as_tensor(low, dtype=torch.float32), torch.as_tensor(high, dtype=torch.float32)
        self.register_buffer("action_scale", (high - low) / 2)
        self.register_buffer("action_bias", (high + low) / 2)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        return self.torso(observations)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.mean(self.torso(observations))) * self.action_scale + self.action_bias

    def mean_and_log_std(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The Gaussian's mean and log std (squashed into [LOG_STD_MIN, LOG_STD_MAX]) on the torso's features."""
        squashed = torch.tanh(self.log_std(features))
        return self.mean(features), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (squashed + 1)

    def sample(self, observations: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actions mean + std * noise, squashed and scaled, and each one's log-probability (summed over entries).

        The noise comes from the caller's own generator, so that a run's draws are part of its checkpoint.
        """
        return self.sample_from_features(self.torso(observations), noise)

    def sample_from_features(self, features: torch.Tensor, noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """sample() on features the caller has from the torso already (the acting step wants both)."""
        mean, log_std = self.mean_and_log_std(features)
        unsquashed = mean + log_std.exp() * noise
        squashed = torch.tanh(unsquashed)
        # log N(u; mean, std) - log |d action / d u|, the change of variables through tanh and the scale.
        gaussian = -0.5 * noise.square() - log_std - HALF_LOG_TWO_PI
        jacobian = torch.log(self.action_scale * (1 - squashed.square()) + JACOBIAN_EPSILON)
        return squashed * self.action_scale + self.action_bias, (gaussian - jacobian).sum(dim=-1)


class TwinQ(nn.Module):
    """Two Q-networks over (observation, action) whose layers are batched into one matrix product each.

    One baddbmm per layer for both critics halves the kernel calls of a gradient step; each critic is
    initialised as nn.Linear would initialise its own layers.
    """

    def __init__(self, observation_size: int, action_size: int, hidden_sizes: list[int], critics: int = 2):
        super().__init__()
        sizes = [observation_size + action_size, *hidden_sizes, 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for inputs, outputs in zip(sizes, sizes[1:]):
            bound = 1 / math.sqrt(inputs)  # nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both
            self.weights.append(nn.Parameter(torch.empty(critics, inputs, outputs).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(critics, 1, outputs).uniform_(-bound, bound)))

    def forward(self, observations: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """[critics, batch] Q-values."""
        inputs = torch.cat([as_float(observations).flatten(1), actions], dim=1)
        hidden = inputs.unsqueeze(0).expand(len(self.weights[0]), -1, -1)
        last = len(self.weights) - 1
        for index, (weight, bias) in enumerate(zip(self.weights, self.biases)):
            hidden = torch.baddbmm(bias, hidden, weight)
            if index < last:
                hidden = torch.relu(hidden)
        return hidden.squeeze(-1)


class Temperature(nn.Module):
    """The entropy temperature alpha, learned as its logarithm so that it stays positive."""

    def __init__(self, initial: float):
        super().__init__()
        self.log_alpha = nn.Parameter(torch.tensor(math.log(initial), dtype=torch.float32))

    def forward(self) -> torch.Tensor:
        return self.log_alpha.exp()


def policy_of(settings, observation_shape: tuple, low: np.ndarray, high: np.ndarray) -> SquashedGaussianPolicy:
    """The policy a [sac] section describes, on the torso its observations get (build_torso)."""
    torso = build_torso(observation_shape, settings.hidden_sizes, settings.network, settings.activation)
    return SquashedGaussianPolicy(torso, low, high)


def critic_of(settings, observation_shape: tuple, action_size: int) -> TwinQ:
    return TwinQ(int(np.prod(observation_shape)), action_size, list(settings.hidden_sizes))
