"""The V-trace learner reports each update's gradient norm before clipping, and whether it was clipped."""
from __future__ import annotations

import pytest
import torch

from vtrace_testing import learner, unrolls


def unclipped_norm(batch) -> float:
    """The gradient norm of the same update, measured by an unclipped learner from the same weights."""
    reference = learner(0.0)
    reference.update(batch, step=0)
    gradients = [parameter.grad for parameter in reference.network.parameters() if parameter.grad is not None]
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in gradients])).item()


@pytest.mark.parametrize("max_grad_norm", [0.0, 1e-3, 1e6])
def test_the_update_reports_the_gradient_norm_before_clipping_and_whether_it_clipped(max_grad_norm):
    batch = unrolls(seed=1)
    expected = unclipped_norm(batch)
    statistics = learner(max_grad_norm).update(batch, step=0)  # update reads its batch, never writes it
    assert statistics["grad_norm"].item() == pytest.approx(expected, rel=1e-5)
    assert expected > 1e-3  # so that 1e-3 clips and 1e6 does not
    assert statistics["clipped"].item() == (1.0 if 0 < max_grad_norm < expected else 0.0)


def test_a_learner_clipped_to_a_tiny_norm_moves_its_weights_less_than_an_unclipped_one():
    # Same batch, same weights: the clip is still applied, not only reported.
    batch = unrolls(seed=2)
    moved = {}
    for max_grad_norm in (0.0, 1e-3):
        trained = learner(max_grad_norm)
        before = [parameter.detach().clone() for parameter in trained.network.parameters()]
        trained.update(batch, step=0)
        moved[max_grad_norm] = sum((parameter.detach() - old).abs().sum().item()
                                   for parameter, old in zip(trained.network.parameters(), before))
    assert 0 < moved[1e-3] < moved[0.0]
