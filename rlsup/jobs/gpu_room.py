"""GPUs for a new job: what the machine's GPUs are as a client can know them, and what no set of them ever holds."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from rlsup import locks, paths, spec as specs
from rlsup.formatting import GIB, counted, gibibytes
from rlsup.hardware import Hardware, gpu_totals, machine_from_environment
from rlsup.jobs.store import Store


@dataclass(frozen=True)
class GpuShortfall:
    """What no set of a machine's GPUs can ever hold, in the words submit's refusal and the daemon's hold share."""

    field: str  # the [job] field that asks too much: "gpus" or "gpu_memory_gb"
    needs: str  # "needs 3 GPUs", "needs 1 GPU with 40 GiB"
    has: str    # "this machine has 2", "this machine has none that large (2 GPUs, the largest of 16 GiB)"
    fix: str    # "set [job] gpus = 2 to run it"

    @property
    def held(self) -> str:
        """The daemon's reason for a queued job it cannot place however long it waits; "held" leads the state cell."""
        return f"held: {self.needs}; {self.has}: {self.fix}"

    @property
    def refusal(self) -> str:
        return f"{self.needs} and {self.has}, so it would never start: {self.fix}"


def large_enough(total_bytes: int | None, memory_bytes: int | None) -> bool:
    """Whether a GPU of total_bytes can ever hold a job of memory_bytes: yes where either is not known."""
    return memory_bytes is None or total_bytes is None or total_bytes >= memory_bytes


def gpu_shortfall(wanted: int, memory_bytes: int | None, totals: Mapping[int, int | None]) -> GpuShortfall | None:
    """Why wanted GPUs of memory_bytes each (None: not known) never fit these GPUs ({index: total bytes, None where
    not read}): more GPUs than there are, or fewer as large; None when they may (a GPU of unknown total may be)."""
    if wanted > len(totals):
        return GpuShortfall("gpus", f"needs {counted(wanted, 'GPU')}", f"this machine has {len(totals)}",
                            f"set [job] gpus = {len(totals)} to run it{' on the CPU' if not totals else ''}")
    # Largest first, an unknown total first of all: the wanted-th of them is the most each of wanted GPUs has.
    sizes = sorted(totals.values(), key=lambda total: -math.inf if total is None else -total)
    if large_enough(sizes[wanted - 1], memory_bytes):
        return None
    large = sum(1 for size in sizes if large_enough(size, memory_bytes))
    known = [size for size in sizes if size is not None]
    unread = f", {len(sizes) - len(known)} of a size not read" if len(known) < len(sizes) else ""
    most = math.floor(sizes[wanted - 1] * 10 / GIB) / 10  # down: the figure offered must fit
    return GpuShortfall("gpu_memory_gb", f"needs {counted(wanted, 'GPU')} with {gibibytes(memory_bytes)} GiB",
                        f"this machine has {large or 'none'} that large ({counted(len(sizes), 'GPU')}, "
                        f"the largest of {gibibytes(max(known))} GiB{unread})",
                        f"set [job] gpu_memory_gb = {most:g} or less to run it")


def machine_gpus(home: Path) -> dict[int, int | None]:
    """The GPUs a job of this home is placed on, {index: total bytes or None}, as a client can know them: a running
    daemon's latest hardware record (it places the job), else this client's own view (RLSUP_FAKE_GPUS or NVML),
    which a daemon that submit starts inherits. Empty where neither sees a GPU: a machine without one and one whose
    NVML cannot be read look alike."""
    if locks.holder(Path(home) / paths.DAEMON_LOCK).held:
        with Store(home) as store:
            recorded = gpu_totals(store.latest_hardware_sample())
        if recorded:
            return recorded
    machine = machine_from_environment() or Hardware()
    try:
        return machine.gpu_memory_totals()
    finally:
        machine.close()


def check_gpus(jobs: list[specs.JobSpec], path: Path, text: str, home: Path, *, cluster: str | None = None) -> None:
    """Refuse (SpecError at the field's line) jobs that no GPUs of this machine can ever hold. A machine whose GPUs
    are not known refuses nothing, and a cluster's job (cluster, else its own [job] cluster) is its cluster's."""
    local = [job for job in jobs if job.job.gpus and not (cluster if cluster is not None else job.job.cluster)]
    totals = machine_gpus(home) if local else {}
    for job in local if totals else ():
        shortfall = gpu_shortfall(job.job.gpus, int(job.job.gpu_memory_gb * GIB) or None, totals)
        if shortfall:
            located = specs.Located(str(path), text)
            raise specs.SpecError([located.problem(("job", shortfall.field), shortfall.refusal)])
