"""One job as the CLI and the TUI see it: the store's row merged with its worker's status.json."""
from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from rlsup import locks, paths
from rlsup.run import foreground
from rlsup.run.status import Phase, WorkerStatus, read_worker_status
from rlsup.jobs.state import ACTIVE, Desired, State
from rlsup.jobs.store import Job, Process
from rlsup.views.decisions import held_mark
from rlsup.views.gpus import job_gpus

# ---------------------------------------------------------------------------------------------
# status.json (run/status.py)


def is_live(job: Job, status: WorkerStatus | None) -> bool:
    """status.json was written by the worker that runs the job now, not a previous one."""
    return status is not None and job.state in ACTIVE and job.pid is not None and status.pid == job.pid


# ---------------------------------------------------------------------------------------------
# Job rows

# Attention first: what runs, then what waits, then what needs a look, then what is over.
STATE_ORDER = {state: rank for rank, state in enumerate((
    State.RUNNING, State.STARTING, State.PAUSING, State.STOPPING, State.QUEUED,
    State.PAUSED, State.FAILED, State.KILLED, State.DONE))}


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
    def foreground(self) -> bool:
        return is_foreground(self.job)

    @property
    def sort_key(self) -> tuple:
        return STATE_ORDER.get(self.job.state, len(STATE_ORDER)), -self.job.priority, self.job.id


# A job has an ETA once it has made this share of its budget. Before its updates begin (DQN's learning_starts) a
# job takes random actions up to 50 times as fast as it trains, so an ETA from that speed was a fraction of the
# real one ("49s" for 3 minutes of work); every example's warm-up is at most 2% of its budget.
ETA_FROM = 0.05


def merge_status(job: Job, status: WorkerStatus | None, *, rate: float | None = None,
                 drift: str | None = None) -> JobRow:
    """A job with its run's status: the step and the speed (rate) come from it only while its worker runs.

    rate is the steps per second to show: the TUI's smoothed one, or reported_rate(status). The ETA waits for
    ETA_FROM of the budget.
    """
    live = is_live(job, status)
    step = status.step if live and status.step is not None else job.step
    speed = rate if live else None
    remaining = job.total_steps - step
    eta = remaining / speed if speed and remaining > 0 and step >= job.total_steps * ETA_FROM else None
    return JobRow(job=job, step=step, steps_per_second=speed, eta_s=eta, drift=drift,
                  mean_return=status.mean_return if status else None)


def reported_rate(status: WorkerStatus | None) -> float | None:
    """The worker's own steps per second over its last second."""
    return status.steps_per_second if status else None


def read_row(job: Job) -> JobRow:
    """A job merged with its run's status.json as it is now, at the speed the worker reports."""
    status = read_worker_status(job.run_dir)
    return merge_status(job, status, rate=reported_rate(status))


def sorted_rows(rows: list[JobRow]) -> tuple[JobRow, ...]:
    return tuple(sorted(rows, key=lambda row: row.sort_key))


# ---------------------------------------------------------------------------------------------
# Which file drives which job


WAITING_WIDTH = 32  # a queued job's reason beside its state; `rlsup status`, the detail screen and events give it whole


def waiting_summary(reason: str) -> str:
    """A reason's first clause: "needs 1 GPU; this machine has 0 (set …)" -> "needs 1 GPU"."""
    clause = reason.splitlines()[0].split(";")[0].split(" (")[0].strip()
    return clause if len(clause) <= WAITING_WIDTH else clause[:WAITING_WIDTH - 1] + "…"


def waiting_words(job: Job) -> str:
    """": needs 1 GPU" or " for a CPU slot" after a queued job's state, ": stopped at rung 2" after an experiment member's pause, in
    `rlsup list` and the TUI's table alike; else ""."""
    if job.state is State.PAUSED:
        mark = held_mark(job.reason)
        return f": {mark}" if mark else ""
    if job.state is not State.QUEUED or not job.reason:
        return ""
    summary = waiting_summary(job.reason)
    # "queued: waiting for a CPU slot" said waiting twice, and was cut to "queued: waitin…" at 120 columns.
    return f" {summary.removeprefix('waiting ')}" if summary.startswith("waiting ") else f": {summary}"


def is_own_copy(job: Job) -> bool:
    """The job follows the copy of its file made at `submit --copy`, not the file itself."""
    return Path(job.spec_path) == Path(job.run_dir) / paths.SOURCE_COPY


# ---------------------------------------------------------------------------------------------
# Foreground runs: shown beside the daemon's jobs, read-only

# A worker's status.json phase as the state a job in it would be in.
PHASE_STATES = {Phase.RUNNING: State.RUNNING, Phase.CHECKPOINTING: State.RUNNING, Phase.PAUSED: State.PAUSED,
                Phase.DONE: State.DONE, Phase.FAILED: State.FAILED}


def is_foreground(job: Job) -> bool:
    """A foreground run has no row in the store, so it goes by minus its pid, an id no stored job has."""
    return job.id < 0


def job_label(job: Job) -> str:
    """How a job is named on screen: its id, or "fg" for a foreground run (which has none)."""
    return "fg" if is_foreground(job) else str(job.id)


def pid_of(job: Job) -> int | None:
    """The job's worker pid: a foreground run always has one, even in the instant it ends."""
    return -job.id if is_foreground(job) else job.pid


def where(job: Job, *, gpu_label: str = "gpu ", separator: str = ",", blank: str = "-",
          gpu_totals: dict[int, int | None] | None = None) -> str:
    """The WHERE cell: GPUs of a local job ("gpu 0,1", blank for none), or its cluster and node ("lab:10.0.0.7");
    the TUI's narrow column drops the label and spaces the GPUs ("0 1"). With the GPUs' totals, the job's memory
    beside its GPU's: "gpu 0 (3.1/80 GiB)" (views/gpus.py)."""
    if job.cluster:
        return job.where
    if job.gpus and gpu_totals is not None:
        return job_gpus(job, gpu_totals)
    return f"{gpu_label}{job.gpus.replace(',', separator)}" if job.gpus else blank


# What to do instead of asking the daemon to act on a foreground run, which lives in its terminal.
FOREGROUND_INSTEAD = {
    "pause": "press Ctrl-C in its terminal to pause it with a checkpoint (from another terminal: kill -INT {pid})",
    "resume": "it runs in its terminal; once paused there, continue it with: rlsup run --resume {run_dir}",
    "kill": "press Ctrl-C twice in its terminal to stop it at once, without a checkpoint",
    "edit": "press Ctrl-C in its terminal, then continue it with your edited file: "
            "rlsup run --resume {run_dir} JOB.toml",
    "show": "`rlsup list` shows it, and its log is {run_dir}/worker.log",
}


def foreground_advice(pid: int, run_dir: str | Path, action: str) -> str:
    """"a foreground run (…), not the daemon's: what to do instead of action" (pause, resume, kill, edit, show)."""
    instead = FOREGROUND_INSTEAD[action].format(run_dir=shlex.quote(str(run_dir)), pid=pid)
    return f"a foreground run (`rlsup run`, pid {pid}), not the daemon's: {instead}"


def foreground_job(run: foreground.Registration, status: WorkerStatus | None) -> Job:
    """A foreground run as a job: its state from its status.json, once its own process has written one."""
    own = status if status is not None and status.pid == run.pid else None
    state = PHASE_STATES.get(own.phase, State.RUNNING) if own else State.STARTING
    step = own.step if own and own.step is not None else 0
    total = own.total_steps if own and own.total_steps else run.total_steps
    updated = own.time if own and own.time else run.started
    return Job(id=-run.pid, name=run.name, spec_path=str(run.run_dir / paths.JOB_FILE), spec_seen=None,
               overrides="{}", run_dir=str(run.run_dir), algo=run.algo, env=run.env, state=state,
               desired=Desired.RUNNING, desired_seq=0, applied_seq=0, priority=0, gpus_wanted=0, restarts=0,
               max_restarts=0, not_before=0.0, step=step, total_steps=total, exit_code=None,
               reason=f"a foreground run (`rlsup run`, pid {run.pid}): Ctrl-C in its terminal pauses it",
               submitted=run.started, started=run.started, finished=None, updated=updated,
               process=Process(pid=run.pid, start_time=run.start_time) if state in ACTIVE else None)


def foreground_jobs(home: Path | None = None, stored: Iterable[Job] = ()) -> list[Job]:
    """The live foreground runs of a home as jobs, but for one the daemon has adopted (it is listed already)."""
    adopted = {job.pid for job in stored if job.pid is not None}
    return [foreground_job(run, read_worker_status(run.run_dir)) for run in foreground.live_runs(home)
            if run.pid not in adopted]


def unowned_workers(home: Path, stored: Iterable[Job]) -> list[tuple[int, Path]]:
    """(pid, run directory) of each worker, found by its run's lock, training a run of home's runs/ that no
    stored job and no foreground run owns: one whose job a lost store took with it."""
    owned = {Path(job.run_dir) for job in stored} | {run.run_dir for run in foreground.live_runs(home)}
    runs = Path(home) / "runs"
    found = []
    for run_dir in sorted(runs.iterdir()) if runs.is_dir() else []:
        lock = run_dir / paths.WORKER_LOCK
        if run_dir in owned or not regular_file(lock):
            continue
        holder = locks.holder(lock)
        if holder.held and holder.pid:
            found.append((holder.pid, run_dir))
    return found


def regular_file(path: Path) -> bool:
    """A regular file itself, not through a link: a FIFO would block its open, and a run may come from a stranger."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
