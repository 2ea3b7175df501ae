"""V-trace against a slow reference written in the paper's notation, and the loss terms against their formulas."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from rlsup.algos import vtrace


def reference_vtrace(log_rhos, discounts, rewards, values, bootstrap_value, rho_bar, pg_rho_bar, c_bar):
    """Espeholt et al. (2018), eq. 1 and the advantage of section 4.2, with a per-step discount γ_t.

    v_s = V(x_s) + Σ_{t=s}^{T-1} (Π_{i=s}^{t-1} γ_i c_i) δ_t V,   δ_t V = ρ_t (r_t + γ_t V(x_{t+1}) − V(x_t)),
    advantage_s = ρ^pg_s (r_s + γ_s v_{s+1} − V(x_s)),   V(x_T) = v_T = bootstrap value.
    Plain Python loops over s, t and every batch column, in float64.
    """
    length, batch = len(log_rhos), len(log_rhos[0])
    vs = np.zeros((length, batch))
    advantages = np.zeros((length, batch))
    for column in range(batch):
        def value(t):
            return bootstrap_value[column] if t == length else values[t][column]

        def ratio(t):
            return math.exp(log_rhos[t][column])

        for s in range(length):
            total = value(s)
            for t in range(s, length):
                product = 1.0
                for i in range(s, t):
                    product *= discounts[i][column] * min(c_bar, ratio(i))
                delta = min(rho_bar, ratio(t)) * (rewards[t][column] + discounts[t][column] * value(t + 1) - value(t))
                total += product * delta
            vs[s, column] = total
        for s in range(length):
            next_vs = bootstrap_value[column] if s == length - 1 else vs[s + 1, column]
            advantages[s, column] = min(pg_rho_bar, ratio(s)) * (
                rewards[s][column] + discounts[s][column] * next_vs - value(s))
    return vs, advantages


def random_unrolls(generator: np.random.Generator, length: int, batch: int, gamma: float = 0.9) -> dict:
    dones = generator.random((length, batch)) < 0.3
    return {
        "log_rhos": torch.tensor(generator.normal(0.0, 1.0, (length, batch))),
        "discounts": torch.tensor(gamma * (1.0 - dones)),
        "rewards": torch.tensor(generator.normal(0.0, 1.0, (length, batch))),
        "values": torch.tensor(generator.normal(0.0, 2.0, (length, batch))),
        "bootstrap_value": torch.tensor(generator.normal(0.0, 2.0, batch)),
    }


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("rho_bar", "pg_rho_bar", "c_bar"), [(1.0, 1.0, 1.0), (0.7, 1.3, 0.5), (2.0, 0.8, 1.5)])
def test_fast_scan_matches_the_slow_reference(seed: int, rho_bar: float, pg_rho_bar: float, c_bar: float) -> None:
    generator = np.random.default_rng(seed)
    length, batch = int(generator.integers(1, 12)), int(generator.integers(1, 6))
    inputs = random_unrolls(generator, length, batch)
    returns = vtrace.from_importance_weights(**inputs, clip_rho_threshold=rho_bar,
                                             clip_pg_rho_threshold=pg_rho_bar, clip_c_threshold=c_bar)
    expected_vs, expected_advantages = reference_vtrace(
        *(inputs[name].tolist() for name in ("log_rhos", "discounts", "rewards", "values", "bootstrap_value")),
        rho_bar, pg_rho_bar, c_bar)
    np.testing.assert_allclose(returns.vs.numpy(), expected_vs, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(returns.pg_advantages.numpy(), expected_advantages, rtol=1e-10, atol=1e-10)


def test_a_done_inside_the_unroll_cuts_the_trace() -> None:
    # Rewards after the done (a new episode) must not reach the targets before it.
    inputs = random_unrolls(np.random.default_rng(0), 6, 3)
    inputs["discounts"][2] = 0.0
    before = vtrace.from_importance_weights(**inputs)
    inputs["rewards"][3:] += 100.0
    inputs["bootstrap_value"] += 100.0
    after = vtrace.from_importance_weights(**inputs)
    torch.testing.assert_close(before.vs[:3], after.vs[:3])
    torch.testing.assert_close(before.pg_advantages[:3], after.pg_advantages[:3])


def test_on_policy_without_clipping_gives_n_step_returns() -> None:
    generator = np.random.default_rng(1)
    length, batch, gamma = 5, 2, 0.9
    inputs = random_unrolls(generator, length, batch, gamma)
    inputs["log_rhos"].zero_()
    inputs["discounts"].fill_(gamma)
    returns = vtrace.from_importance_weights(**inputs)
    rewards, bootstrap = inputs["rewards"], inputs["bootstrap_value"]
    for s in range(length):
        expected = sum(gamma ** (t - s) * rewards[t] for t in range(s, length)) + gamma ** (length - s) * bootstrap
        torch.testing.assert_close(returns.vs[s], expected)


def test_no_gradient_flows_through_targets_or_advantages() -> None:
    inputs = random_unrolls(np.random.default_rng(2), 7, 4)
    for name in ("log_rhos", "values", "bootstrap_value", "rewards"):
        inputs[name].requires_grad_(True)
    returns = vtrace.from_importance_weights(**inputs)
    assert not returns.vs.requires_grad and not returns.pg_advantages.requires_grad
    # The baseline loss's gradient reaches the values only directly: d/dV ½(v − V)² = −(v − V).
    values = inputs["values"]
    vtrace.baseline_loss(returns.vs - values).backward()
    torch.testing.assert_close(values.grad, -(returns.vs - values).detach())
    assert inputs["log_rhos"].grad is None and inputs["bootstrap_value"].grad is None


def test_from_logits_uses_the_log_ratio_of_the_taken_actions() -> None:
    generator = torch.Generator().manual_seed(3)
    length, batch, actions_count = 4, 3, 5
    behaviour = torch.randn(length, batch, actions_count, generator=generator, dtype=torch.float64)
    target = torch.randn(length, batch, actions_count, generator=generator, dtype=torch.float64)
    actions = torch.randint(actions_count, (length, batch), generator=generator)
    inputs = random_unrolls(np.random.default_rng(3), length, batch)
    del inputs["log_rhos"]
    returns = vtrace.from_logits(behaviour, target, actions, **inputs, clip_rho_threshold=0.9)
    log_rhos = (torch.log_softmax(target, -1) - torch.log_softmax(behaviour, -1)).gather(
        -1, actions.unsqueeze(-1)).squeeze(-1)
    expected = vtrace.from_importance_weights(log_rhos, **inputs, clip_rho_threshold=0.9)
    torch.testing.assert_close(returns.vs, expected.vs)
    torch.testing.assert_close(returns.pg_advantages, expected.pg_advantages)


def test_loss_terms_are_sums_over_time_and_batch() -> None:
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(3, 2, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    actions = torch.randint(4, (3, 2), generator=generator)
    advantages = torch.randn(3, 2, generator=generator, dtype=torch.float64, requires_grad=True)
    probabilities = torch.softmax(logits, -1)
    expected_policy = sum(-math.log(probabilities[t, b, actions[t, b]].item()) * advantages[t, b].item()
                          for t in range(3) for b in range(2))
    expected_entropy = sum(p * math.log(p) for p in probabilities.flatten().tolist())
    assert vtrace.policy_gradient_loss(logits, actions, advantages).item() == pytest.approx(expected_policy)
    assert vtrace.entropy_loss(logits).item() == pytest.approx(expected_entropy)
    assert vtrace.baseline_loss(advantages).item() == pytest.approx(0.5 * float((advantages.detach() ** 2).sum()))
    vtrace.policy_gradient_loss(logits, actions, advantages).backward()
    assert advantages.grad is None, "the advantages are constants of the policy-gradient loss"
