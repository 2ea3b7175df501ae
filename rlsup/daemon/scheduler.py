"""Placement of queued jobs on CPU slots and GPUs: priority, then submission order (pure)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from rlsup.daemon.clusters import Cluster, ClusterError, clusters_from_tables


def _default_cpu_jobs() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


@dataclass(frozen=True)
class Settings:
    """$RLSUP_HOME/daemon.toml; every key optional."""

    cpu_jobs: int = field(default_factory=_default_cpu_jobs,
                          metadata={"doc": "CPU-only jobs run at once (0 holds them all queued).", "minimum": 0})
    jobs_per_gpu: int = field(default=1, metadata={"doc": "Jobs sharing one GPU.", "minimum": 1})
    restart_backoff_s: float = field(default=2.0, metadata={
        "doc": "Wait before the first crash restart; doubles with each further restart.", "minimum": 0})
    tick_s: float = field(default=0.1, metadata={
        "doc": "How often the daemon checks for new intents and exited workers.", "minimum": 0.01})
    debounce_s: float = field(default=0.4, metadata={
        "doc": "Quiet time after a job file changes before the edit is applied.", "minimum": 0})
    hardware_sample_s: float = field(default=2.0, metadata={
        "doc": "Seconds between hardware samples stored for the TUI (0: none).", "minimum": 0})
    log_max_bytes: int = field(default=5 << 20, metadata={"doc": "daemon.log size before rotation.",
                                                          "minimum": 1024})
    log_backups: int = field(default=3, metadata={"doc": "Rotated daemon logs kept.", "minimum": 0})
    on_done: str = field(default="", metadata={"doc": "Shell command run when a job is done (daemon/hooks.py)."})
    on_failed: str = field(default="", metadata={"doc": "Shell command run when a job fails."})
    on_paused: str = field(default="", metadata={"doc": "Shell command run when a job is paused."})
    hook_timeout_s: float = field(default=60.0, metadata={
        "doc": "Seconds a hook may run before its process group is killed.", "minimum": 0.1})
    # [[cluster]] tables (rlsup/daemon/clusters.py), outside [daemon]: where jobs with [job] cluster run.
    clusters: tuple[Cluster, ...] = field(default=(), metadata={"doc": "[[cluster]] tables.", "table": True})


class SettingsError(ValueError):
    """daemon.toml holds an unknown key or a bad value."""


def settings_from_mapping(data: dict, *, source: str = "daemon.toml") -> Settings:
    """Settings from parsed TOML, defaults for missing keys; raises SettingsError naming the key."""
    table = data.get("daemon", data) if isinstance(data.get("daemon"), dict) else data
    known = {f.name: f for f in dataclasses.fields(Settings) if not f.metadata.get("table")}
    values = {}
    if "cluster" in data:
        try:
            values["clusters"] = clusters_from_tables(data["cluster"], source=source)
        except ClusterError as error:
            raise SettingsError(str(error)) from None
    for key, value in table.items():
        if key == "cluster" and table is data:
            continue
        if key not in known:
            raise SettingsError(f"{source}: {key}: unknown setting (known: {', '.join(known)})")
        values[key] = _checked(source, known[key], value)
    return Settings(**values)


def _checked(source: str, setting: dataclasses.Field, value):
    if setting.type in ("str", str):
        if not isinstance(value, str):
            raise SettingsError(f"{source}: {setting.name}: must be a string (a shell command)")
        return value
    wanted = int if setting.type in ("int", int) else float
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            wanted is int and not isinstance(value, int)):
        raise SettingsError(f"{source}: {setting.name}: must be {'an integer' if wanted is int else 'a number'}")
    if value < setting.metadata["minimum"]:
        raise SettingsError(f"{source}: {setting.name}: must be at least {setting.metadata['minimum']}")
    return wanted(value)


@dataclass(frozen=True)
class Candidate:
    """A queued job as the scheduler sees it."""

    job_id: int
    priority: int = 0
    gpus_wanted: int = 0
    not_before: float = 0.0


@dataclass(frozen=True)
class Placement:
    job_id: int
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """Jobs to start now with their GPUs, and why each other candidate waits."""

    start: tuple[Placement, ...]
    waiting: dict[int, str]


CPU_WAIT = "waiting for a CPU slot"  # why a CPU job waits: the reason a resumed job may take a slot back for


def queue_key(candidate: Candidate) -> tuple[int, int]:
    """Higher priority first; ties by submission order (the job id)."""
    return -candidate.priority, candidate.job_id


def order(candidates: list[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=queue_key)


def slots_to_reclaim(resumed: list[Candidate], running: list[Candidate], free: int) -> dict[int, int]:
    """Running CPU jobs to pause so that resumed jobs get their place back: {job to pause: resumed job}.

    A pause gives its slot to the next job in the queue; without this, the resumed job would wait behind
    jobs submitted after it until they end. Each resumed job waiting for a CPU slot (in queue order) takes a
    slot that will be free once the jobs pausing or stopping have ended (free), else the slot of the running
    job last in queue order, if that job comes after it: one ahead of it in the queue keeps its slot. With
    more jobs running than cpu_jobs allows (free < 0: the setting was lowered), a pause frees no slot that a
    resumed job could take, so none is asked for.
    """
    if free < 0:
        return {}
    victims = sorted(running, key=queue_key, reverse=True)
    reclaimed: dict[int, int] = {}
    for waiting in order(resumed):
        if free > 0:
            free -= 1
        elif victims and queue_key(victims[0]) > queue_key(waiting):
            reclaimed[victims.pop(0).job_id] = waiting.job_id
    return reclaimed


def place(candidates: list[Candidate], *, active_gpu_sets: list[tuple[int, ...]], active_cpu_jobs: int,
          gpu_indices: tuple[int, ...], settings: Settings, now: float) -> Schedule:
    """Decide which queued jobs start now.

    CPU-only jobs take the free CPU slots. A GPU job takes the least loaded GPUs that still have
    room; when it cannot be placed, lower GPU jobs wait behind it so it is not starved.
    """
    cpu_free = settings.cpu_jobs - active_cpu_jobs
    load = {index: 0 for index in gpu_indices}
    for gpus in active_gpu_sets:
        for index in gpus:
            load[index] = load.get(index, 0) + 1
    start: list[Placement] = []
    waiting: dict[int, str] = {}
    blocked_by: int | None = None
    for candidate in order(candidates):
        if candidate.not_before > now:
            waiting[candidate.job_id] = f"restart backoff: {candidate.not_before - now:.1f} s left"
        elif candidate.gpus_wanted == 0:
            if cpu_free > 0:
                cpu_free -= 1
                start.append(Placement(candidate.job_id))
            else:
                waiting[candidate.job_id] = f"{CPU_WAIT} ({settings.cpu_jobs} in use)"
        elif candidate.gpus_wanted > len(gpu_indices):
            waiting[candidate.job_id] = gpu_shortage(candidate.gpus_wanted, len(gpu_indices))
        elif blocked_by is not None:
            waiting[candidate.job_id] = f"waiting behind job {blocked_by} for GPUs"
        else:
            chosen = _free_gpus(load, candidate.gpus_wanted, settings.jobs_per_gpu)
            if chosen is None:
                blocked_by = candidate.job_id
                waiting[candidate.job_id] = f"waiting for {candidate.gpus_wanted} free GPU(s)"
                continue
            for index in chosen:
                load[index] += 1
            start.append(Placement(candidate.job_id, chosen))
    return Schedule(tuple(start), waiting)


def _free_gpus(load: dict[int, int], wanted: int, jobs_per_gpu: int) -> tuple[int, ...] | None:
    """The wanted least loaded GPUs with room left (lowest index on ties), or None."""
    free = sorted((count, index) for index, count in load.items() if count < jobs_per_gpu)
    if len(free) < wanted:
        return None
    return tuple(sorted(index for _, index in free[:wanted]))


def gpu_shortage(wanted: int, available: int) -> str:
    """Why a job waits for GPUs this machine does not have, and how to run it anyway."""
    return (f"needs {wanted} GPU{'s' if wanted != 1 else ''}; this machine has {available} "
            f"(set [job] gpus = {available} to run it{' on the CPU' if available == 0 else ''})")


def place_on_clusters(candidates: list[tuple[Candidate, str]], *, active: dict[str, int],
                      settings: Settings, now: float) -> Schedule:
    """Decide which queued cluster jobs (each with its cluster's name) are submitted now.

    The cluster places them on its nodes; rlsup only keeps each cluster to its max_jobs, so that
    jobs wait in this queue, in priority order, rather than in the cluster's.
    """
    limits = {cluster.name: cluster.max_jobs for cluster in settings.clusters}
    running = dict(active)
    start: list[Placement] = []
    waiting: dict[int, str] = {}
    clusters = dict((candidate.job_id, name) for candidate, name in candidates)
    for candidate in order([candidate for candidate, _ in candidates]):
        name = clusters[candidate.job_id]
        if candidate.not_before > now:
            waiting[candidate.job_id] = f"restart backoff: {candidate.not_before - now:.1f} s left"
        elif name not in limits:
            known = ", ".join(limits) or "none"
            waiting[candidate.job_id] = f"cluster {name!r} is not in daemon.toml (known: {known})"
        elif running.get(name, 0) >= limits[name]:
            waiting[candidate.job_id] = f"waiting for room on cluster {name} (max_jobs = {limits[name]} in use)"
        else:
            running[name] = running.get(name, 0) + 1
            start.append(Placement(candidate.job_id))
    return Schedule(tuple(start), waiting)
