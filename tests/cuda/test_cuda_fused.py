"""MinAtar's fused games on a CUDA GPU (issue 53): JAX's memory counted beside torch's, and a restored trainer
going on bit for bit there."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda_testing import NEEDS_CUDA

pytestmark = NEEDS_CUDA
JOB = Path(__file__).parents[2] / "jobs" / "minatar-vtrace-fused.toml"


def cuda_trainer():
    pytest.importorskip("gymnax")
    from rlsup import spec as specs
    from rlsup.algos.fused_vtrace import FusedVtraceTrainer

    spec = specs.load(JOB).replace("job", device="cuda").replace("vtrace", batch_size=64)
    return FusedVtraceTrainer(spec, torch.device("cuda"))


def test_the_fused_trainer_reports_jaxs_gpu_memory_beside_torchs() -> None:
    trainer = cuda_trainer()
    for _ in range(3):
        trainer.iterate()
    torch_bytes = int(torch.cuda.max_memory_reserved())
    jax_bytes = trainer.games.game.device_memory_bytes()
    assert jax_bytes is not None and jax_bytes > 0, "JAX's allocator holds the games' state on the GPU"
    assert trainer.gpu_memory_bytes() == torch_bytes + jax_bytes
    trainer.close()


def test_a_fused_trainer_restored_on_cuda_goes_on_bit_for_bit() -> None:
    first = cuda_trainer()
    for _ in range(5):
        first.iterate()
    state = first.state_dict()
    second = cuda_trainer()
    second.load_state_dict(state)
    for _ in range(5):
        assert first.iterate() == second.iterate()
    assert first.fingerprint() == second.fingerprint()
