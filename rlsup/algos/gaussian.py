"""A diagonal Gaussian policy over Box actions: log-probabilities, entropy, and the map from sample to env action."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from rlsup.algos.envs.actions import ActionSpace

SQUASHES = ("clip", "tanh")
LOG_SQRT_TWO_PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_probabilities(means: torch.Tensor, log_stds: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
    """log N(u; μ, σ²) of each sample, summed over the vector's entries: [..., A] in, [...] out."""
    standardised = (samples - means) * torch.exp(-log_stds)
    return torch.sum(-0.5 * standardised ** 2 - log_stds - LOG_SQRT_TWO_PI, dim=-1)


def gaussian_entropies(log_stds: torch.Tensor) -> torch.Tensor:
    """The Gaussian's entropy, Σ (log σ + ½ + log √(2π)) over the vector's entries: [..., A] in, [...] out."""
    return torch.sum(log_stds + (0.5 + LOG_SQRT_TWO_PI), dim=-1)


class ActionMap:
    """From the policy's sample u (a Gaussian in [-1, 1] units) to the action the env receives, and the log of that
    map's Jacobian, so that a log-probability is the density of the env's action.

    The policy works in [-1, 1] units whatever the bounds, so that one log_std_init suits every env. "clip" clips
    u to [-1, 1]; "tanh" squashes it. Either way the result is scaled affinely into [low, high]. The learner stores
    u itself, not the env's action: the ratio of two policies' densities at the same u is then exact (the
    Jacobian, the same for both, cancels), where recovering u from a tanh-squashed action (atanh near ±1) is not.
    With "clip", the density is u's before the clip, which the env's action cannot tell apart at the bounds.
    """

    def __init__(self, actions: ActionSpace, squash: str):
        if squash not in SQUASHES:
            raise ValueError(f"squash must be one of {', '.join(SQUASHES)}, not {squash!r}")
        if not actions.continuous:
            raise ValueError(f"a Gaussian policy needs continuous actions, not {actions.describe()}")
        self.squash = squash
        self.low, self.high = actions.bounds()
        self.half_range = (self.high - self.low) / 2
        # log |d action / d (clipped or squashed u)|: the affine scale's constant part of the Jacobian.
        self.log_scale = float(np.sum(np.log(self.half_range.astype(np.float64))))

    def env_actions(self, samples: np.ndarray) -> np.ndarray:
        """[N, A] float32 actions in [low, high] for [N, A] samples u."""
        unit = np.tanh(samples) if self.squash == "tanh" else np.clip(samples, -1.0, 1.0)
        return (self.low + (unit + 1.0) * self.half_range).astype(np.float32)

    def env_actions_tensor(self, samples: torch.Tensor) -> torch.Tensor:
        """env_actions in torch, on the samples' device and dtype."""
        low = torch.as_tensor(self.low, dtype=samples.dtype, device=samples.device)
        half_range = torch.as_tensor(self.half_range, dtype=samples.dtype, device=samples.device)
        return into_bounds(samples, self.squash, low, half_range)

    def log_jacobian(self, samples: torch.Tensor) -> torch.Tensor:
        """log |det d action / d u| of [..., A] samples: [...]. A clip's is the scale's alone."""
        if self.squash == "clip":
            return torch.full(samples.shape[:-1], self.log_scale, dtype=samples.dtype, device=samples.device)
        # log(1 − tanh²(u)) = 2 (log 2 − u − softplus(−2u)), which stays finite where tanh(u) rounds to ±1.
        log_derivative = 2.0 * (math.log(2.0) - samples - functional.softplus(-2.0 * samples))
        return torch.sum(log_derivative, dim=-1) + self.log_scale

    def log_probabilities(self, means: torch.Tensor, log_stds: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
        """The density of the env's action that the sample u became: the Gaussian's less the map's Jacobian."""
        return gaussian_log_probabilities(means, log_stds, samples) - self.log_jacobian(samples)

    def entropies(self, log_stds: torch.Tensor) -> torch.Tensor:
        """The Gaussian's entropy in the env's units (the affine scale's constant added; tanh's part has no closed
        form and is left out, as PPO and IMPALA implementations leave it: it only bounds what the bonus rewards)."""
        return gaussian_entropies(log_stds) + self.log_scale


class MeanActions(nn.Module):
    """Observations in, the Gaussian's mean as the env's action out (clipped or squashed, then scaled into the
    bounds): the deterministic policy that evaluation, enjoy and export play."""

    def __init__(self, network: nn.Module, action_map: ActionMap):
        super().__init__()
        self.network = network
        self.squash = action_map.squash
        self.register_buffer("low", torch.as_tensor(action_map.low))
        self.register_buffer("half_range", torch.as_tensor(action_map.half_range))

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return into_bounds(self.network(observations).means, self.squash, self.low, self.half_range)


def into_bounds(samples: torch.Tensor, squash: str, low: torch.Tensor, half_range: torch.Tensor) -> torch.Tensor:
    """Samples u clipped or squashed into [-1, 1], then scaled into [low, low + 2 half_range]."""
    unit = torch.tanh(samples) if squash == "tanh" else torch.clamp(samples, -1.0, 1.0)
    return low + (unit + 1.0) * half_range
