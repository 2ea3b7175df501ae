"""A GPU's state as rlsup keeps and reads it: the CUDA random stream through a checkpoint, and NVML's readings."""
from __future__ import annotations

from pathlib import Path

import torch

from checkpoint_testing import write
from cuda_testing import NEEDS_CUDA
from rlsup.checkpoint.rng import global_rng_state, restore_global_rng_state
from rlsup.checkpoint.store import load_checkpoint
from rlsup.hardware import Hardware
from rlsup.run.status import read_worker_status
from rlsup_testing import cartpole_job, start_rlsup, wait_for

pytestmark = NEEDS_CUDA


def test_the_cuda_random_stream_goes_on_from_a_checkpoint(tmp_path: Path) -> None:
    torch.cuda.manual_seed_all(11)
    torch.rand(5, device="cuda")  # the stream has moved: the saved state is not the seed's
    entry = write(tmp_path, {"rng": global_rng_state()}, 100)
    expected = torch.rand(1000, device="cuda").cpu()
    torch.rand(77, device="cuda")  # and moved on again before the restore

    _, state = load_checkpoint(entry.path)
    assert len(state["rng"]["cuda"]) == torch.cuda.device_count()
    restore_global_rng_state(state["rng"])
    assert torch.equal(torch.rand(1000, device="cuda").cpu(), expected)


def test_nvml_sees_the_gpu_and_a_cuda_worker_by_its_pid(tmp_path: Path) -> None:
    import pynvml

    hardware = Hardware()
    try:
        assert hardware.gpu_indices() == tuple(range(torch.cuda.device_count()))
        gpu = hardware.sample().gpus[0]
        assert gpu.memory_total_bytes and gpu.memory_total_bytes > (8 << 30), gpu
        assert gpu.memory_used_bytes is not None and gpu.utilization_percent is not None, gpu
        assert gpu.name and not gpu.fake, gpu
    finally:
        hardware.close()

    job = cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=0)
    job.write_text(job.read_text().replace('device = "cpu"', 'device = "cuda"'))
    run_dir = tmp_path / "run"
    process = start_rlsup("run", job, "--run-dir", run_dir)
    try:
        status = wait_for(lambda: (lambda seen: seen if seen and (seen.step or 0) > 500 else None)(
                          read_worker_status(run_dir)), timeout=120, what="the worker to train on the GPU")
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            wait_for(lambda: worker_memory(pynvml, handle, status.pid), timeout=30,
                     what=f"NVML to list the worker's pid {status.pid} among the GPU's compute processes")
        finally:
            pynvml.nvmlShutdown()
    finally:
        process.kill()
        process.communicate(timeout=30)


def worker_memory(pynvml, handle, pid: int) -> int | None:
    """The GPU memory NVML counts for pid (bytes; None while it lists no such process or no figure)."""
    for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
        if process.pid == pid:
            return process.usedGpuMemory or None
    return None
