"""The tiny trainer with a GPU memory report a test chooses per job, and torch's own CUDA out-of-memory on request.

Packing is tested on fake GPUs (RLSUP_FAKE_GPUS) with CPU workers, so the figure cannot come from torch's
allocator: [job] seed picks it, in tenths of a GiB (seed 31 reports 3.1 GiB), and a job named "oom-at-N"
raises torch.cuda.OutOfMemoryError (a class the CPU build has too) when it reaches step N.
"""
from __future__ import annotations

import re

import torch
from tiny_algorithm.training import TinyTrainer

GIB = 1 << 30
OUT_OF_MEMORY_NAME = re.compile(r"oom-at-(\d+)")


class GpuMemoryTrainer(TinyTrainer):
    """Reports seed / 10 GiB as the GPU memory it holds; a job named oom-at-N runs out of it at step N."""

    def __init__(self, spec, device):
        super().__init__(spec, device)
        self.reported_bytes = spec.job.seed * GIB // 10
        found = OUT_OF_MEMORY_NAME.fullmatch(spec.job.name)
        self.out_of_memory_step = int(found.group(1)) if found else None

    def gpu_memory_bytes(self) -> int:
        return self.reported_bytes

    def iterate(self) -> list[dict]:
        if self.step == self.out_of_memory_step:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (a test plugin's)")
        return super().iterate()
