"""Where a job's worker runs: the seam between the reconcile loop and how processes are started."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rlsup.jobs.state import Exit


class Signal(str, enum.Enum):
    """What the daemon asks of a running worker; each runner delivers it its own way."""

    PAUSE = "pause"    # finish the step, write a pause checkpoint, exit 75
    RELOAD = "reload"  # re-read the run's job.toml and apply its live fields
    KILL = "kill"      # stop at once, helpers included, no checkpoint

    def __str__(self) -> str:
        return self.value


class RunnerUnavailable(OSError):
    """Where the job runs cannot be reached now (a cluster's head): the job waits and is tried again."""

    retry_s = 10.0


@dataclass(frozen=True)
class WorkerHandle:
    """One worker as its runner knows it: enough to recognise it again after a daemon restart.

    pid is the worker's own pid, the one it writes into status.json and exit.json (the worker
    contract), whatever runs it; start_time and boot_id tell a live worker from a reused pid. A runner
    whose workers live elsewhere names them by ref (a Ray submission id, a Slurm job id); its boot_id
    names that place ("ray:lab"), and pid is 0 until the worker's status.json tells it.
    """

    job_id: int
    pid: int
    start_time: float | None
    boot_id: str
    run_dir: Path
    ref: str = ""
    node: str = ""  # the machine it runs on, when that is not this one


class JobRunner(Protocol):
    """Starts, signals, reaps and adopts workers; nothing else in the daemon knows how."""

    boot_id: str  # where this runner's workers live: a handle from elsewhere is never adopted

    def ready_to_start(self, run_dir: Path) -> bool:
        """False while the runner readies itself to start run_dir's worker (the local fork server importing):
        the job stays queued until a later round."""

    def start(self, job_id: int, run_dir: Path, gpus: tuple[int, ...]) -> WorkerHandle:
        """Start a worker on run_dir with these GPUs; raises OSError when it cannot."""

    def adopt(self, recorded: WorkerHandle) -> bool:
        """Follow a worker a previous daemon recorded, if that very worker still runs."""

    def adopt_run_holder(self, job_id: int, run_dir: Path) -> WorkerHandle | None:
        """Follow the live worker holding run_dir's lock (whoever started it), if there is one."""

    def run_held(self, run_dir: Path) -> bool:
        """Whether some worker trains run_dir now (a second one would write the same files)."""

    def handle(self, job_id: int) -> WorkerHandle | None:
        """The worker this runner follows for the job, or None."""

    def handles(self) -> list[WorkerHandle]:
        """Every worker this runner follows."""

    def signal(self, job_id: int, kind: Signal) -> bool:
        """Deliver kind to the job's worker; False when it is gone."""

    def reap(self) -> list[tuple[WorkerHandle, Exit]]:
        """Workers that ended since the last call, with how they ended; they are no longer followed."""

    def exit_of_lost(self, recorded: WorkerHandle) -> Exit:
        """How a recorded worker that can no longer be followed ended (its exit.json); Exit() if unknown."""

    def forget(self, job_id: int) -> None:
        """Stop following the job's worker (the daemon gave up on it)."""

    def log_tail(self, run_dir: Path, lines: int) -> list[str]:
        """The last lines a worker of run_dir wrote to its log."""
