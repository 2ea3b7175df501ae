"""GPU packing as `rlsup list` and the TUI show it: each job's memory beside its GPU's total."""
from __future__ import annotations

from typing import Iterable

from rlsup.formatting import gibibytes
from rlsup.jobs.state import ACTIVE
from rlsup.jobs.store import Job


def memory_share(used_bytes: int, total_bytes: int | None) -> str:
    """"3.1/80 GiB": memory used of a GPU's total, or "3.1 GiB" where the total is not known."""
    total = f"/{gibibytes(total_bytes)}" if total_bytes is not None else ""
    return f"{gibibytes(used_bytes)}{total} GiB"


def job_gpus(job: Job, totals: dict[int, int | None]) -> str:
    """A local job's GPUs with its own memory on the first of them: "gpu 0 (3.1/80 GiB)", or "gpu 0,1"."""
    indices, need = ",".join(map(str, job.gpu_indices)), job.gpu_memory_need
    if need is None or not job.gpu_indices:
        return f"gpu {indices}"
    return f"gpu {indices} ({memory_share(need, totals.get(job.gpu_indices[0]))})"


def jobs_by_gpu(jobs: Iterable[Job]) -> dict[int, list[Job]]:
    """Each local GPU's index -> the active jobs placed on it, in the order given (a cluster's GPUs are Ray's)."""
    held: dict[int, list[Job]] = {}
    for job in jobs:
        if job.state in ACTIVE and not job.cluster:
            for index in job.gpu_indices:
                held.setdefault(index, []).append(job)
    return held


def packing_lines(jobs: Iterable[Job], totals: dict[int, int | None]) -> list[str]:
    """One line per GPU that active jobs hold: "gpu 0: 2 jobs, 6.1/80 GiB" (a job not yet measured says so)."""
    held = jobs_by_gpu(jobs)
    lines = []
    for index in sorted(held):
        holders = held[index]
        count = f"{len(holders)} job{'s' if len(holders) != 1 else ''}"
        if any(job.gpu_memory_need is None for job in holders):
            lines.append(f"gpu {index}: {count}, memory not measured yet (a whole GPU)")
            continue
        used = sum(job.gpu_memory_need for job in holders)
        lines.append(f"gpu {index}: {count}, {memory_share(used, totals.get(index))}")
    return lines
