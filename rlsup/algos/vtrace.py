"""V-trace targets and the IMPALA loss terms (Espeholt et al. 2018, section 4), time-major [T, B]."""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch.nn import functional


class VTraceReturns(NamedTuple):
    """vs: the V-trace value targets; pg_advantages: the policy-gradient advantages. Neither has a gradient."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor


def action_log_probabilities(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """log π(a_t | x_t) for logits [T, B, A] and actions [T, B]."""
    log_policy = functional.log_softmax(logits, dim=-1)
    return log_policy.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def from_logits(behaviour_logits: torch.Tensor, target_logits: torch.Tensor, actions: torch.Tensor,
                discounts: torch.Tensor, rewards: torch.Tensor, values: torch.Tensor,
                bootstrap_value: torch.Tensor, clip_rho_threshold: float | None = 1.0,
                clip_pg_rho_threshold: float | None = 1.0, clip_c_threshold: float | None = 1.0) -> VTraceReturns:
    """V-trace with log ρ_t = log π(a_t|x_t) − log μ(a_t|x_t) taken from both policies' logits."""
    log_rhos = action_log_probabilities(target_logits, actions) - action_log_probabilities(behaviour_logits, actions)
    return from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value, clip_rho_threshold,
                                   clip_pg_rho_threshold, clip_c_threshold)


@torch.no_grad()
def from_importance_weights(log_rhos: torch.Tensor, discounts: torch.Tensor, rewards: torch.Tensor,
                            values: torch.Tensor, bootstrap_value: torch.Tensor,
                            clip_rho_threshold: float | None = 1.0, clip_pg_rho_threshold: float | None = 1.0,
                            clip_c_threshold: float | None = 1.0) -> VTraceReturns:
    """V-trace targets from log importance weights; every input is [T, B] except bootstrap_value [B].

    discounts are γ_t = γ (1 − done_t): a done inside the unroll cuts both the target and the trace.
    A threshold of None leaves that weight unclipped.
    """
    rhos = torch.exp(log_rhos)
    clipped_rhos = _clip(rhos, clip_rho_threshold)
    cs = _clip(rhos, clip_c_threshold)
    next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)])
    deltas = clipped_rhos * (rewards + discounts * next_values - values)
    # v_s − V(x_s) = δ_s + γ_s c_s (v_{s+1} − V(x_{s+1})), scanned backwards from zero after the last step.
    corrections = torch.empty_like(values)
    accumulated = torch.zeros_like(bootstrap_value)
    for time in reversed(range(values.shape[0])):
        accumulated = deltas[time] + discounts[time] * cs[time] * accumulated
        corrections[time] = accumulated
    vs = values + corrections
    next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)])
    pg_advantages = _clip(rhos, clip_pg_rho_threshold) * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)


def _clip(weights: torch.Tensor, threshold: float | None) -> torch.Tensor:
    return weights if threshold is None else torch.clamp(weights, max=threshold)


def policy_gradient_loss(logits: torch.Tensor, actions: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """Σ over T and batch of the cross-entropy −log π(a_t|x_t), weighted by the (constant) advantages."""
    cross_entropy = -action_log_probabilities(logits, actions)
    return torch.sum(cross_entropy * advantages.detach())


def baseline_loss(differences: torch.Tensor) -> torch.Tensor:
    """½ Σ (v_s − V(x_s))² over T and batch."""
    return 0.5 * torch.sum(differences ** 2)


def entropy_loss(logits: torch.Tensor) -> torch.Tensor:
    """Σ π log π over actions, T and batch: the negative entropy, so adding it rewards exploration."""
    policy = functional.softmax(logits, dim=-1)
    log_policy = functional.log_softmax(logits, dim=-1)
    return torch.sum(policy * log_policy)
