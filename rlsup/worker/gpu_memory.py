"""A worker's GPU memory as it reports it (status.json, checkpoints) and the pause a CUDA out-of-memory becomes."""
from __future__ import annotations

import os

from rlsup.formatting import gibibytes
from rlsup.hardware import GpuMemory, visible_device_indices


def measure(trainer) -> GpuMemory | None:
    """The trainer's GPU memory now; None for a learner that is not on a GPU.

    A trainer may report its own count (gpu_memory_bytes(), as LearnerTrainer does from torch's allocator);
    NVML's count for this process is added where the machine has NVML."""
    report = getattr(trainer, "gpu_memory_bytes", None)
    reserved = report() if callable(report) else None
    if reserved is None:
        return None
    from rlsup.hardware import process_gpu_memory_bytes

    return GpuMemory(int(reserved), process_gpu_memory_bytes(os.getpid()))


def is_out_of_memory(error: BaseException) -> bool:
    """A CUDA out-of-memory, as torch raises it (its class exists in CPU builds too)."""
    import torch

    return isinstance(error, torch.cuda.OutOfMemoryError)


def out_of_memory_sentence(trainer, device) -> str:
    """"CUDA out of memory at X GiB on GPU N": what the job is held with, N as the daemon numbers GPUs."""
    memory = measure(trainer) if trainer is not None else None
    figure = memory.figure if memory is not None else None
    amount = f" at {gibibytes(figure)} GiB" if figure is not None else ""
    return f"CUDA out of memory{amount} on {gpu_name(device)}"


def gpu_name(device) -> str:
    """The worker's GPU as the machine numbers it: CUDA_VISIBLE_DEVICES maps the process's cuda:0 to it."""
    visible = visible_device_indices() or ()
    local = getattr(device, "index", None) or 0
    if local < len(visible):
        return f"GPU {visible[local]}"
    return f"GPU {local}"
