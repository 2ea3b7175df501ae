"""Q-networks and policy/value networks on the torso an observation gets, and the parameter fingerprint."""
from __future__ import annotations

import hashlib
from typing import Callable, Iterable, NamedTuple

import numpy as np
import torch
from torch import nn

from rlsup.algos.envs.observations import INTENSITY_MAX, network_for
from rlsup.algos.optimizers import EagerOptimizer


class DSiLU(nn.Module):
    """The derivative of SiLU, sigmoid(x) (1 + x (1 - sigmoid(x))) (Elfwing et al. 2018): bounded, for a last
    hidden layer."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        sigmoid = torch.sigmoid(inputs)
        return sigmoid * (1 + inputs * (1 - sigmoid))


def hidden_activation(activation: str, *, last: bool) -> nn.Module:
    """The unit after a hidden layer: relu, ReLU throughout; silu, SiLU and dSiLU on the last hidden layer, as
    Elfwing et al. 2018 and the MinAtar paper's actor-critic use them."""
    if activation == "relu":
        return nn.ReLU()
    if activation == "silu":
        return DSiLU() if last else nn.SiLU()
    raise ValueError(f"unknown activation {activation!r}")


class MlpTorso(nn.Module):
    """Fully connected layers, each followed by the activation; its output is the network's feature vector."""

    def __init__(self, input_size: int, hidden_sizes: list[int], activation: str = "relu"):
        super().__init__()
        layers: list[nn.Module] = []
        for index, width in enumerate(hidden_sizes):
            layers += [nn.Linear(input_size, width), hidden_activation(activation, last=index == len(hidden_sizes) - 1)]
            input_size = width
        self.layers = nn.Sequential(*layers)
        self.output_size = input_size

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.layers(as_float(observations).flatten(1))


def as_float(observations: torch.Tensor) -> torch.Tensor:
    """float32 observations; uint8 ones are pixel intensities, scaled to [0, 1] (bool images are stored as 0/255)."""
    if observations.dtype == torch.uint8:
        # The same float32 quotients as `observations / 255.0`, whose mixed-type loop runs ~20% slower on a CPU.
        return observations.float().div_(float(INTENSITY_MAX))
    return observations.float()


class NatureTorso(nn.Module):
    """The convolutional torso of Mnih et al. 2015 over (channels, height, width) images, ending in 512 features."""

    def __init__(self, input_channels: int, height: int = 84, width: int = 84, activation: str = "relu"):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(input_channels, 32, kernel_size=8, stride=4), hidden_activation(activation, last=False),
            nn.Conv2d(32, 64, kernel_size=4, stride=2), hidden_activation(activation, last=False),
            nn.Conv2d(64, 64, kernel_size=3, stride=1), hidden_activation(activation, last=False),
            nn.Flatten(),
            nn.Linear(64 * _nature_side(height) * _nature_side(width), 512),  # 3136 at 84x84
            hidden_activation(activation, last=True),
        )
        self.output_size = 512
        # oneDNN and cuDNN run these convolutions fastest on NHWC memory: a CPU update takes ~30% less.
        self.to(memory_format=torch.channels_last)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        # Reordered while still uint8, a quarter of float32's bytes; the scaling keeps the layout, so the
        # values are the same bits and a batch of 32 costs ~1 ms less (the reorder of 4 channels is slow).
        return self.layers(as_float(channels_last(observations)))


def channels_last(images: torch.Tensor) -> torch.Tensor:
    """images (N, C, H, W) in NHWC memory: the same values, laid out as oneDNN's convolutions read them."""
    if images.device.type != "cpu" or images.is_contiguous(memory_format=torch.channels_last):
        return images.contiguous(memory_format=torch.channels_last)
    # On the CPU, torch's one-call reorder of a few uint8 channels runs about half as fast as one strided
    # copy per channel (found by bench/dqn_profile.py on Pong). A GPU keeps the one call, one kernel rather
    # than one per channel (not measured there).
    reordered = torch.empty_like(images, memory_format=torch.channels_last)
    for channel in range(images.shape[1]):
        reordered[:, channel] = images[:, channel]
    return reordered


def _nature_side(side: int) -> int:
    """Pixels left of one side after the Nature torso's three convolutions."""
    return ((side - 8) // 4 + 1 - 4) // 2 + 1 - 2


class SmallConvTorso(nn.Module):
    """The torso of the MinAtar paper's agents (Young & Tian 2019): one 3x3 convolution with 16 channels, then
    128 units (its DQN's units are ReLU, its actor-critic's SiLU and dSiLU: activation "silu")."""

    def __init__(self, input_channels: int, height: int, width: int, activation: str = "relu"):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Conv2d(input_channels, 16, kernel_size=3, stride=1), hidden_activation(activation, last=False),
            nn.Flatten(),
            nn.Linear(16 * (height - 2) * (width - 2), 128), hidden_activation(activation, last=True),
        )
        self.output_size = 128

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.layers(as_float(observations))


class QNetwork(nn.Module):
    """A torso and a linear head with one Q-value per action."""

    def __init__(self, torso: nn.Module, num_actions: int):
        super().__init__()
        self.torso = torso
        self.head = nn.Linear(torso.output_size, num_actions)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        """The penultimate activations, used as feature vectors by elite and attentive replay."""
        return self.torso(observations)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(observations))


class PolicyValueOutput(NamedTuple):
    """One forward pass: policy logits [N, A], state values [N] and feature vectors [N, F]."""

    logits: torch.Tensor
    values: torch.Tensor
    features: torch.Tensor


class PolicyValueNetwork(nn.Module):
    """A torso, a linear feature head (no activation) and policy and value heads on those features.

    The feature head's outputs are what elite replay compares between the acting and the current network.
    """

    def __init__(self, torso: nn.Module, num_actions: int, feature_size: int):
        super().__init__()
        self.torso = torso
        self.feature_head = nn.Linear(torso.output_size, feature_size)
        self.policy_head = nn.Linear(feature_size, num_actions)
        self.value_head = nn.Linear(feature_size, 1)

    def features(self, observations: torch.Tensor) -> torch.Tensor:
        return self.feature_head(self.torso(observations))

    def forward(self, observations: torch.Tensor) -> PolicyValueOutput:
        features = self.features(observations)
        return PolicyValueOutput(self.policy_head(features), self.value_head(features).squeeze(-1), features)


class NormalisedTorso(nn.Module):
    """A torso whose vector observations are first standardised by running statistics, clipped to ±CLIP.

    The mean and standard deviation are frozen parameters, not buffers: they travel to the actors with the weights,
    are saved with them, and are part of an exported model, which then takes the env's raw observations."""

    CLIP = 10.0

    def __init__(self, torso: nn.Module, observation_size: int):
        super().__init__()
        self.observation_mean = nn.Parameter(torch.zeros(observation_size), requires_grad=False)
        self.observation_std = nn.Parameter(torch.ones(observation_size), requires_grad=False)
        self.torso = torso
        self.output_size = torso.output_size

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        standardised = (as_float(observations).flatten(1) - self.observation_mean) / self.observation_std
        return self.torso(torch.clamp(standardised, -self.CLIP, self.CLIP))


class GaussianPolicyValueOutput(NamedTuple):
    """One forward pass of a Gaussian policy: means and log standard deviations [N, A] of the sample u (in [-1, 1]
    units, see gaussian.ActionMap), state values [N] and feature vectors [N, F]."""

    means: torch.Tensor
    log_stds: torch.Tensor
    values: torch.Tensor
    features: torch.Tensor


class GaussianPolicyValueNetwork(PolicyValueNetwork):
    """PolicyValueNetwork whose policy head gives a diagonal Gaussian's means, with one learned log standard
    deviation per action entry, the same in every state (as PPO's and IMPALA's continuous agents start)."""

    def __init__(self, torso: nn.Module, action_size: int, feature_size: int, log_std_init: float):
        super().__init__(torso, action_size, feature_size)
        # Means near 0 at first, so that the first actions explore around the middle of the bounds rather than
        # wherever random weights point (as stable-baselines3 scales its action head by 0.01).
        with torch.no_grad():
            self.policy_head.weight.mul_(0.01)
            self.policy_head.bias.zero_()
        self.log_std = nn.Parameter(torch.full((action_size,), float(log_std_init)))

    def forward(self, observations: torch.Tensor) -> GaussianPolicyValueOutput:
        features = self.features(observations)
        means = self.policy_head(features)
        return GaussianPolicyValueOutput(means, self.log_std.expand_as(means), self.value_head(features).squeeze(-1),
                                         features)


def build_torso(observation_shape: tuple, hidden_sizes: list[int], network: str = "auto",
                activation: str = "relu") -> nn.Module:
    """The torso named by network ([dqn]/[vtrace] network), "auto" resolved by observations.network_for, with
    the units named by activation.

    Every algorithm builds its networks through this one function, so a run's torso follows its spec.
    """
    name = network_for(network, observation_shape)
    if name == "nature_cnn":
        return NatureTorso(*observation_shape, activation=activation)
    if name == "small_cnn":
        return SmallConvTorso(*observation_shape, activation=activation)
    return MlpTorso(int(np.prod(observation_shape)), list(hidden_sizes), activation)


def build_q_network(observation_shape: tuple, num_actions: int, hidden_sizes: list[int],
                    network: str = "auto", activation: str = "relu") -> QNetwork:
    """A torso (see build_torso) with one Q-value per action."""
    return QNetwork(build_torso(observation_shape, hidden_sizes, network, activation), num_actions)


def build_policy_value_network(observation_shape: tuple, num_actions: int, hidden_sizes: list[int],
                               feature_size: int, network: str = "auto",
                               activation: str = "relu") -> PolicyValueNetwork:
    """A torso (see build_torso) with feature, policy and value heads."""
    return PolicyValueNetwork(build_torso(observation_shape, hidden_sizes, network, activation), num_actions,
                              feature_size)


def q_network_of(settings, observation_shape: tuple, num_actions: int) -> QNetwork:
    """The Q-network a [dqn] section describes (hidden_sizes, network, activation)."""
    return build_q_network(observation_shape, num_actions, settings.hidden_sizes, settings.network,
                           settings.activation)


def policy_value_network_of(settings, observation_shape: tuple, num_actions: int, *,
                            continuous: bool = False) -> PolicyValueNetwork:
    """The policy/value network a [vtrace] section describes (hidden_sizes, feature_size, network, activation,
    normalize_observations): softmax logits over num_actions, or with continuous a Gaussian over a vector of
    num_actions (log_std_init)."""
    if not continuous and not settings.normalize_observations:
        return build_policy_value_network(observation_shape, num_actions, settings.hidden_sizes,
                                          settings.feature_size, settings.network, settings.activation)
    torso = build_torso(observation_shape, settings.hidden_sizes, settings.network, settings.activation)
    if settings.normalize_observations:
        torso = NormalisedTorso(torso, int(np.prod(observation_shape)))
    if not continuous:
        return PolicyValueNetwork(torso, num_actions, settings.feature_size)
    return GaussianPolicyValueNetwork(torso, num_actions, settings.feature_size, settings.log_std_init)


def fingerprint(module: nn.Module) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, bytes): equal iff bit-identical."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
        # reshape: a 0-d tensor (a learned scalar) cannot be viewed as bytes; the bytes are the same either way.
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def gradient_step(optimizer: torch.optim.Optimizer | EagerOptimizer, loss: torch.Tensor,
                  parameters: Iterable[nn.Parameter], *, learning_rate: float, max_grad_norm: float,
                  measure_norm: bool = False) -> torch.Tensor | None:
    """One optimizer step on loss at a scheduled learning rate, gradients clipped to max_grad_norm when above 0.

    Returns the gradients' total norm before clipping, on the device, when it was computed anyway (clipping)
    or asked for (measure_norm); else None, so that a learner that neither clips nor logs it pays nothing.
    """
    for group in optimizer.param_groups:
        group["lr"] = learning_rate
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = None
    if max_grad_norm > 0:
        norm = nn.utils.clip_grad_norm_(parameters, max_grad_norm)
    elif measure_norm:
        norm = nn.utils.get_total_norm([parameter.grad for parameter in parameters if parameter.grad is not None])
    optimizer.step()
    return norm


class GreedyActions(nn.Module):
    """Observations in, the argmax of a network's per-action scores out: what enjoy plays and export writes."""

    def __init__(self, scores: nn.Module):
        super().__init__()
        self.scores = scores

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.scores(observations).argmax(dim=1)


class PolicyLogits(nn.Module):
    """A policy/value network's policy logits alone, the scores its greedy action maximises."""

    def __init__(self, network: PolicyValueNetwork):
        super().__init__()
        self.network = network

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.network(observations).logits


def greedy_actions_module(network: nn.Module, weights: dict, *, logits: bool = False) -> GreedyActions:
    """The greedy policy as a CPU module, with the given weights loaded (logits: a PolicyValueNetwork's)."""
    network.load_state_dict(weights)
    return GreedyActions(PolicyLogits(network) if logits else network).eval().requires_grad_(False)


def numpy_policy(module: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """A Policy playing a module that maps a batch of observations to actions."""

    @torch.no_grad()
    def policy(observations: np.ndarray) -> np.ndarray:
        return module(torch.as_tensor(observations)).numpy()

    return policy


def cpu_greedy_policy(network: nn.Module, weights: dict, *, logits: bool = False,
                      ) -> Callable[[np.ndarray], np.ndarray]:
    """A policy that plays the argmax of the network's scores (logits: its policy logits) on the CPU."""
    return numpy_policy(greedy_actions_module(network, weights, logits=logits))
