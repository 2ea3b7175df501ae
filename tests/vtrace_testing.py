"""What the V-trace learner tests share: a small random batch of unrolls and a learner of chosen clip and device."""
from __future__ import annotations

import numpy as np
import torch

from rlsup.algos.impala import VtraceLearner
from rlsup.algos.nets import policy_value_network_of
from rlsup.replay.unrolls import UnrollBatch
from rlsup.spec import VtraceSection

LENGTH, SIZE, ACTIONS, OBSERVATION = 5, 6, 3, (4,)


def unrolls(seed: int) -> UnrollBatch:
    """SIZE unrolls of LENGTH steps, rewards large enough (sd 5) that the gradients' norm is well above 1e-3."""
    generator = np.random.default_rng(seed)
    return UnrollBatch(
        observations=generator.normal(size=(LENGTH + 1, SIZE, *OBSERVATION)).astype(np.float32),
        actions=generator.integers(0, ACTIONS, size=(LENGTH, SIZE)),
        rewards=generator.normal(0, 5, size=(LENGTH, SIZE)).astype(np.float32),
        dones=generator.random((LENGTH, SIZE)) < 0.1,
        behaviour_logits=generator.normal(size=(LENGTH, SIZE, ACTIONS)).astype(np.float32),
        features=np.zeros((LENGTH + 1, SIZE, 8), np.float32),
        indices=np.arange(SIZE))


def learner(max_grad_norm: float, device: str = "cpu") -> VtraceLearner:
    """A small MLP learner, its weights the same for every call (seed 0)."""
    settings = VtraceSection(hidden_sizes=[16], feature_size=8, max_grad_norm=max_grad_norm)
    torch.manual_seed(0)
    return VtraceLearner(settings, policy_value_network_of(settings, OBSERVATION, ACTIONS), torch.device(device))
