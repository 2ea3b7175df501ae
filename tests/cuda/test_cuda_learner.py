"""The V-trace learner's scalars on a GPU: every one on the device, summed without a copy, as on the CPU."""
from __future__ import annotations

import pytest

from cuda_testing import NEEDS_CUDA
from rlsup.algos.impala import LOSS_NAMES
from rlsup.algos.loss_sums import LossSums
from vtrace_testing import learner, unrolls

pytestmark = NEEDS_CUDA


@pytest.mark.parametrize("max_grad_norm", [0.0, 1e-3, 40.0])
def test_a_cuda_update_reports_the_cpu_updates_gradient_norm_and_clip(max_grad_norm):
    batch = unrolls(seed=3)
    expected = learner(max_grad_norm).update(batch, step=0)
    statistics = learner(max_grad_norm, device="cuda").update(batch, step=0)
    assert {value.device.type for value in statistics.values()} == {"cuda"}
    sums = LossSums(LOSS_NAMES)
    sums.add(statistics)  # a scalar left on the CPU would fail here
    means = sums.means()
    assert means["grad_norm"] == pytest.approx(expected["grad_norm"].item(), rel=1e-4)
    assert means["clipped"] == expected["clipped"].item()
