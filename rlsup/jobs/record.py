"""The job record: a row of the store's jobs table as typed data, with sub-records that exist only in some states."""
from __future__ import annotations

import dataclasses
import enum
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, TypedDict

from rlsup.formatting import GIB
from rlsup.jobs.state import ACTIVE, Desired, State
from rlsup.spec import JobSection, JobSpec


class SignalKind(str, enum.Enum):
    """What the daemon told a worker whose exit it now waits for."""

    PAUSE = "pause"            # a pause checkpoint, then exit 75
    KILL = "kill"              # a kill requested: no checkpoint
    PAUSE_KILL = "pause-kill"  # a pause that overran stop_grace_s, killed: resumes from the previous checkpoint

    def __str__(self) -> str:
        return self.value


class EventKind(str, enum.Enum):
    """What an event records. The values are what the store holds, so a store of any version reads."""

    STATE = "state"              # a state change: from_state and to_state say which
    INTENT = "intent"            # a client asked for pause, resume or kill
    EDIT = "edit"                # an edit of the job file applied
    REFUSED = "refused"          # an edit, or part of one, refused: the job goes on without it
    SIGNAL = "signal"            # a signal sent to the worker
    DAEMON = "daemon"            # the daemon started, stopped, read daemon.toml, or gave a job up
    ADOPTED = "adopted"          # a running worker taken on by this daemon
    WAITING = "waiting"          # why a queued job does not start yet
    CHECKPOINT = "checkpoint"    # what a worker's start made of the checkpoints (newer ones skipped, and why)
    FEATURE_OFF = "feature off"  # a requested feature the worker had to switch off
    MOVING = "moving"            # the run on its way under a cluster's run_root, or why it stayed
    MOVED = "moved"              # the run now under the cluster's run_root
    DELETED = "deleted"          # the old run of a move deleted
    KEPT = "kept"                # the old run of a move not (or only partly) deleted, and why
    DECISION = "decision"        # an experiment's scheduler promoted, stopped or forked a member, and why

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Process:
    """An active job's worker: its GPUs from placement on; pid, start time and boot once it runs."""

    gpus: tuple[int, ...] = ()
    pid: int | None = None
    start_time: float | None = None  # to tell the worker from a later process given the same pid
    boot_id: str | None = None       # a pid from another boot is never the worker
    ref: str | None = None           # the worker's name where it runs, when not a local pid (a Ray submission id)
    node: str | None = None          # the cluster node it runs on, once known


@dataclass(frozen=True)
class SentSignal:
    """A signal sent to an active job's worker, and when (a pause's grace runs from it)."""

    kind: SignalKind
    time: float | None = None


@dataclass(frozen=True)
class Job:
    """One row of jobs. process and signal exist only while the job is active (a worker may exist).

    The columns spec_columns() names (name, algo, env, priority, gpus_wanted, total_steps, max_restarts,
    cluster) copy the run's accepted job.toml (written with it at submit and at each accepted edit, the
    budget re-read when a worker ends), so listing and scheduling need no file; job.toml is their source.
    """

    id: int
    name: str
    spec_path: str
    spec_seen: str | None
    overrides: str
    run_dir: str
    algo: str
    env: str
    state: State
    desired: Desired
    desired_seq: int
    applied_seq: int
    priority: int
    gpus_wanted: int
    restarts: int
    max_restarts: int
    not_before: float
    step: int
    total_steps: int
    exit_code: int | None
    reason: str
    submitted: float
    started: float | None
    finished: float | None
    updated: float
    process: Process | None = None
    signal: SentSignal | None = None
    experiment: str = ""  # the experiment (seeds and variants submitted together) it belongs to; "" alone
    cluster: str = ""     # the [[cluster]] it runs on ([job] cluster); "" for this machine
    moved_from: str | None = None  # the run directory a move left behind, until the daemon deletes it
    gpu_memory_gb: float = 0.0     # [job] gpu_memory_gb: GiB declared per GPU (0: none)
    gpu_memory_bytes: int | None = None  # what its worker last reported per GPU, kept while it is paused

    @property
    def gpu_memory_need(self) -> int | None:
        """Bytes per GPU to place it by: the larger of its declared and measured figures; None while it has
        neither, which takes a whole GPU. The larger, since a declaration may know of growth to come."""
        figures = [figure for figure in (self.gpu_memory_bytes, int(self.gpu_memory_gb * GIB) or None) if figure]
        return max(figures) if figures else None

    @property
    def where(self) -> str:
        """Where the job runs: "local", or the cluster's name and, once known, the node ("lab:10.0.0.7")."""
        node = self.process.node if self.process else None
        return f"{self.cluster}:{node}" if self.cluster and node else self.cluster or "local"

    @property
    def gpu_indices(self) -> tuple[int, ...]:
        return self.process.gpus if self.process else ()

    @property
    def gpus(self) -> str:
        """The GPUs the job holds, as CUDA_VISIBLE_DEVICES writes them ("" for none)."""
        return ",".join(map(str, self.gpu_indices))

    @property
    def pid(self) -> int | None:
        """The worker's pid while it has one."""
        return self.process.pid if self.process else None

    @property
    def new_intent(self) -> bool:
        """A client intent the daemon has not settled yet."""
        return self.desired_seq > self.applied_seq

    @property
    def override_values(self) -> dict:
        return json.loads(self.overrides or "{}")


@dataclass(frozen=True)
class Event:
    """One row of events: a state change, an edit applied or refused, a signal sent."""

    id: int
    time: float
    job_id: int | None
    kind: EventKind
    from_state: str | None
    to_state: str | None
    message: str


class JobChanges(TypedDict, total=False):
    """What transition() and update() may set; process and signal write their sub-records' columns."""

    process: Process | None
    signal: SentSignal | None
    step: int
    applied_seq: int
    restarts: int
    not_before: float
    desired: Desired
    exit_code: int | None
    started: float
    finished: float
    reason: str
    spec_seen: str
    name: str
    algo: str
    env: str
    priority: int
    gpus_wanted: int
    total_steps: int
    max_restarts: int
    cluster: str
    gpu_memory_gb: float
    gpu_memory_bytes: int | None


CHANGE_KEYS = frozenset(JobChanges.__annotations__)
# The columns of the sub-records, which exist only in the states that have them.
PROCESS_COLUMNS = ("gpus", "pid", "process_start", "boot_id", "worker_ref", "node")
SIGNAL_COLUMNS = ("signal_sent", "signal_time")


def change_columns(changes: dict) -> dict:
    """The columns a set of changes writes; ValueError names anything that is not a change."""
    unknown = set(changes) - CHANGE_KEYS
    if unknown:
        raise ValueError(f"not a job change: {sorted(unknown)} (a state changes by transition())")
    columns = {key: value for key, value in changes.items() if key not in ("process", "signal")}
    if "process" in changes:
        process = changes["process"]
        values = ((process.gpus, process.pid, process.start_time, process.boot_id, process.ref, process.node)
                  if process else ("", None, None, None, None, None))
        columns.update(zip(PROCESS_COLUMNS, values))
    if "signal" in changes:
        signal = changes["signal"]
        columns.update(zip(SIGNAL_COLUMNS, (signal.kind, signal.time) if signal else (None, None)))
    return columns


def job_from_row(values: dict) -> Job:
    """A Job from a row's columns (as a dict); the sub-records only where the state has them."""
    state = values["state"] = State(values["state"])
    values["desired"] = Desired(values["desired"])
    gpus, pid, start_time, boot_id, ref, node = (values.pop(column) for column in PROCESS_COLUMNS)
    kind, sent = (values.pop(column) for column in SIGNAL_COLUMNS)
    if state in ACTIVE:
        indices = tuple(int(part) for part in gpus.split(",") if part)
        values["process"] = Process(indices, pid, start_time, boot_id, ref, node)
        values["signal"] = SentSignal(SignalKind(kind), sent) if kind else None
    return Job(**values)


# The columns of a job's row that copy its run's [job] section, each with the field it copies.
JOB_COLUMNS = {"name": "name", "algo": "algo", "priority": "priority", "gpus_wanted": "gpus",
               "total_steps": "total_steps", "max_restarts": "max_restarts", "cluster": "cluster",
               "gpu_memory_gb": "gpu_memory_gb"}


def section_columns(section: JobSection, columns: Iterable[str] = tuple(JOB_COLUMNS)) -> dict:
    """The row's copy of a [job] section (of the named columns only, if given), as Store.update takes it."""
    return {column: getattr(section, JOB_COLUMNS[column]) for column in columns}


def spec_columns(spec: JobSpec) -> dict:
    """Every column of a job's row that copies its run's job.toml, as Store.submit and Store.update take them."""
    return {**section_columns(spec.job), "env": spec.env.id}


def row_section(job: Job) -> JobSection:
    """The [job] section as the job's row copies it, defaults for the rest: what the daemon goes by when
    job.toml does not read."""
    return dataclasses.replace(JobSection(), **{field: getattr(job, column) for column, field in JOB_COLUMNS.items()})


def event_from_row(values: dict) -> Event:
    return Event(**{**values, "kind": EventKind(values["kind"])})


def jobs_following(path: str | Path, jobs: list[Job]) -> list[Job]:
    """The jobs that edits of this file reach (the daemon watches no killed job's file)."""
    wanted = os.path.normpath(str(path))
    return [job for job in jobs if job.state is not State.KILLED and os.path.normpath(job.spec_path) == wanted]
