"""The torch side of a worker's start: which device, how many threads, which float mode, deterministic kernels."""
from __future__ import annotations

import os

from rlsup import spec as specs
from rlsup.run.float_mode import set_flush_denormals


class UsageError(Exception):
    """The job cannot run as written (exit 2, never retried)."""


def select_device(requested: str):
    """The torch device for [job] device; CUDA_VISIBLE_DEVICES (set by the daemon) decides which GPU."""
    import torch

    if requested == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", 0)
    if requested == "cuda":
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise UsageError(f'[job] device = "cuda" but no GPU is visible (CUDA_VISIBLE_DEVICES={visible!r})')
    return torch.device("cpu")


def configure_torch(spec: specs.JobSpec) -> None:
    """A fixed thread count and the job's float mode: CPU kernels are deterministic for a given count, so CPU
    resumes are bit-exact."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS starts, so set it first
    import torch

    torch.set_num_threads(spec.job.threads)
    if not set_flush_denormals(spec.job.flush_denormals):
        raise UsageError("[job] flush_denormals = true needs a CPU that flushes subnormal floats to zero (x86-64's "
                         "FTZ and DAZ), and this one cannot: set it to false")


def make_cuda_deterministic(device) -> None:
    """Ask CUDA for deterministic kernels where they exist (warn where not).

    Only for CUDA: the switch imports torch's compiler stack, seconds of start-up a CPU job does not need.
    """
    import torch

    if device.type == "cuda":
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False
