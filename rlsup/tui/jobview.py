"""One line of the jobs table: a job with its live status, smoothed speed, and any file/run disagreement."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rlsup import paths
from rlsup.daemon import client
from rlsup.jobstate import ACTIVE, State
from rlsup.store import Job

# Attention first: what runs, then what waits, then what needs a look, then what is over.
STATE_ORDER = {state: rank for rank, state in enumerate((
    State.RUNNING, State.STARTING, State.PAUSING, State.STOPPING, State.QUEUED,
    State.PAUSED, State.FAILED, State.KILLED, State.DONE))}


# ---------------------------------------------------------------------------------------------
# Job rows


@dataclass(frozen=True)
class JobRow:
    """A job with what its status.json adds: live step, speed, mean return and time left."""

    job: Job
    step: int
    steps_per_second: float | None
    mean_return: float | None
    eta_s: float | None
    drift: str | None = None   # "file differs from run: dqn.lr refused" until they agree again

    @property
    def sort_key(self) -> tuple:
        return STATE_ORDER.get(self.job.state, len(STATE_ORDER)), -self.job.priority, self.job.id


def job_row(job: Job, status: dict | None, drift: str | None = None) -> JobRow:
    """Combine a job with its run's status; speed and ETA only from the worker that runs now."""
    status = status or {}
    live = job.state in ACTIVE and job.pid is not None and status.get("pid") == job.pid
    step = int(status.get("step") or 0) if live else job.step
    speed = number(status.get("steps_per_second")) if live else None
    remaining = job.total_steps - step
    eta = remaining / speed if speed and remaining > 0 else None
    return JobRow(job=job, step=step, steps_per_second=speed, mean_return=number(status.get("mean_return")),
                  eta_s=eta, drift=drift)


def sorted_rows(rows: list[JobRow]) -> tuple[JobRow, ...]:
    return tuple(sorted(rows, key=lambda row: row.sort_key))


def gpu_holders(jobs: list[Job]) -> dict[int, str]:
    """GPU index -> the active jobs placed on it, as "3 pong"."""
    holders: dict[int, list[str]] = {}
    for job in jobs:
        if job.state in ACTIVE:
            for index in job.gpu_indices:
                holders.setdefault(index, []).append(f"{job.id} {job.name}")
    return {index: ", ".join(names) for index, names in holders.items()}


def number(value) -> float | None:
    """A finite int or float as a float; None for anything else (bools, strings, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


# ---------------------------------------------------------------------------------------------
# Job file against run spec


class DriftCache:
    """Each job's spec_drift, recomputed only when its job file or its run's job.toml changes.

    A poll stats two files per job instead of parsing two TOML files per job, every second.
    """

    def __init__(self):
        self._known: dict[int, tuple[tuple, str | None]] = {}

    def drift(self, job: Job) -> str | None:
        if job.state is State.KILLED:
            return None  # the daemon no longer applies edits to it
        stamps = (job.spec_path, file_stamp(Path(job.spec_path)), file_stamp(Path(job.run_dir) / paths.JOB_FILE),
                  repr(sorted(job.override_values.items())))
        known = self._known.get(job.id)
        if known is None or known[0] != stamps:
            known = self._known[job.id] = (stamps, client.spec_drift(job))
        return known[1]


def file_stamp(path: Path) -> tuple[int, int]:
    """Size and modification time, (0, 0) for a missing file: changes whenever the file does."""
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return stat.st_size, stat.st_mtime_ns
