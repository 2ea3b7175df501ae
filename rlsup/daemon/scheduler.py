"""Placement of queued jobs on CPU slots and GPUs (packed by memory, later jobs backfilling): priority, then
submission order (pure)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from rlsup.daemon.clusters import Cluster, ClusterError, clusters_from_tables
from rlsup.formatting import GIB, finite, gibibytes
from rlsup.jobs.gpu_room import gpu_shortfall, large_enough


def _default_cpu_jobs() -> int:
    """Half the machine's CPU cores, at least 1: one CPU job at a time on a 2-core machine."""
    return max(1, (os.cpu_count() or 2) // 2)


# Each numeric setting's maximum, far beyond any use: without one, a 20-digit log_backups is a rollover loop of
# 10**19 renames, a tick_s past threading.TIMEOUT_MAX (292 years) makes wait() raise, and an integer of hundreds
# of digits is no float at all.
SECONDS_MAX = 24 * 3600
COUNT_MAX = 1 << 16


@dataclass(frozen=True)
class Settings:
    """$RLSUP_HOME/daemon.toml; every key optional."""

    cpu_jobs: int = field(default_factory=_default_cpu_jobs,
                          metadata={"doc": "CPU-only jobs run at once (0 holds them all queued).", "minimum": 0,
                                    "maximum": COUNT_MAX})
    jobs_per_gpu: int = field(default=8, metadata={
        "doc": "Cap on jobs sharing one GPU, memory permitting (one of unknown memory takes a whole GPU).",
        "minimum": 1, "maximum": COUNT_MAX})
    gpu_memory_margin_gib: float = field(default=1.0, metadata={
        "doc": "GPU memory kept free on each GPU beyond the jobs' figures (CUDA contexts, fragmentation).",
        "minimum": 0, "maximum": 1024})
    restart_backoff_s: float = field(default=2.0, metadata={
        "doc": "Wait before the first crash restart; doubles with each further restart.", "minimum": 0,
        "maximum": SECONDS_MAX})
    tick_s: float = field(default=0.1, metadata={
        "doc": "How often the daemon checks for new intents and exited workers.", "minimum": 0.01,
        "maximum": SECONDS_MAX})
    debounce_s: float = field(default=0.4, metadata={
        "doc": "Quiet time after a job file changes before the edit is applied.", "minimum": 0,
        "maximum": SECONDS_MAX})
    hardware_sample_s: float = field(default=2.0, metadata={
        "doc": "Seconds between hardware samples stored for the TUI (0: none).", "minimum": 0,
        "maximum": SECONDS_MAX})
    log_max_bytes: int = field(default=5 << 20, metadata={"doc": "daemon.log size before rotation.",
                                                          "minimum": 1024, "maximum": 1 << 40})
    log_backups: int = field(default=3, metadata={"doc": "Rotated daemon logs kept.", "minimum": 0,
                                                  "maximum": 1000})
    on_done: str = field(default="", metadata={"doc": "Shell command run when a job is done (daemon/hooks.py)."})
    on_failed: str = field(default="", metadata={"doc": "Shell command run when a job fails."})
    on_paused: str = field(default="", metadata={"doc": "Shell command run when a job is paused."})
    hook_timeout_s: float = field(default=60.0, metadata={
        "doc": "Seconds a hook may run before its process group is killed.", "minimum": 0.1,
        "maximum": SECONDS_MAX})
    warm_start: bool = field(default=True, metadata={
        "doc": "Fork workers from a process that imported torch once, 2-3 s sooner each (read at daemon start)."})
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
    if setting.type in ("bool", bool):
        if not isinstance(value, bool):
            raise SettingsError(f"{source}: {setting.name}: must be true or false")
        return value
    if setting.type in ("str", str):
        if not isinstance(value, str):
            raise SettingsError(f"{source}: {setting.name}: must be a string (a shell command)")
        return value
    wanted = int if setting.type in ("int", int) else float
    if not _is_a(wanted, value):
        raise SettingsError(f"{source}: {setting.name}: must be {'an integer' if wanted is int else 'a finite number'}")
    # Compared before float(): the comparison is exact for an integer of any size, which float() is not.
    if value < setting.metadata["minimum"]:
        raise SettingsError(f"{source}: {setting.name}: must be at least {setting.metadata['minimum']}")
    if value > setting.metadata["maximum"]:
        raise SettingsError(f"{source}: {setting.name}: must be at most {setting.metadata['maximum']}")
    return wanted(value)


def _is_a(wanted: type, value) -> bool:
    """Whether a TOML value is an integer (for int) or a number (for float); never a bool, nan or inf."""
    if isinstance(value, bool) or not isinstance(value, wanted if wanted is int else (int, float)):
        return False
    # TOML has inf and nan, which no setting means: nan passes every minimum, and either breaks arithmetic.
    return not isinstance(value, float) or finite(value)


@dataclass(frozen=True)
class Candidate:
    """A queued job as the scheduler sees it."""

    job_id: int
    priority: int = 0
    gpus_wanted: int = 0
    not_before: float = 0.0
    gpu_memory_bytes: int | None = None  # per GPU: the larger of measured and declared; None: neither yet


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


@dataclass(frozen=True)
class GpuHolding:
    """What a running job holds: its GPUs, and its memory on each (None: never measured nor declared)."""

    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None = None


@dataclass
class GpuLoad:
    """One GPU as packing counts it: its jobs and the sum of their memory figures."""

    index: int
    total_bytes: int | None
    jobs: int = 0
    used_bytes: int = 0
    unmeasured: bool = False  # it holds a job of unknown memory, which takes the whole GPU

    def add(self, memory_bytes: int | None) -> None:
        self.jobs += 1
        if memory_bytes is None:
            self.unmeasured = True
        else:
            self.used_bytes += memory_bytes

    @property
    def free_bytes(self) -> int | None:
        return None if self.total_bytes is None else self.total_bytes - self.used_bytes

    def shareable(self, cap: int) -> bool:
        """Whether a second job may join by memory: below the cap, every figure known, and a known total.

        A job of unknown memory takes a whole GPU until its first report. A GPU of unknown total cannot be
        packed either: with no size to check the figures against, it holds one job, as if each took it whole.
        """
        return 0 < self.jobs < cap and not self.unmeasured and self.total_bytes is not None

    def takes(self, memory_bytes: int | None, *, cap: int, margin_bytes: int) -> bool:
        """Whether a job of this memory per GPU (None: unknown) may go on this GPU now."""
        if self.jobs == 0:
            # Alone, a job has the whole GPU as before packing; the margin is kept between jobs that share
            # one, so that a job measured close to the total (its own CUDA context included) still restarts.
            return memory_bytes is None or self.total_bytes is None or memory_bytes <= self.total_bytes
        return (memory_bytes is not None and self.shareable(cap)
                and self.used_bytes + memory_bytes + margin_bytes <= self.total_bytes)

    def order_key(self) -> tuple:
        """Least loaded first: fewest jobs, then the most free memory (unknown last), then the lowest index."""
        free = self.free_bytes
        return self.jobs, free is None, -(free or 0), self.index


class Packing:
    """The GPUs to place on, what running jobs hold on them, and the rules of sharing one."""

    def __init__(self, holdings: list[GpuHolding], *, gpu_indices: tuple[int, ...],
                 totals: dict[int, int | None], cap: int, margin_bytes: int):
        self.cap, self.margin_bytes = cap, margin_bytes
        self.loads = {index: GpuLoad(index, totals.get(index)) for index in gpu_indices}
        for holding in holdings:
            for index in holding.gpus:
                if index in self.loads:  # a GPU no longer offered is not placed on, so its load is moot
                    self.loads[index].add(holding.gpu_memory_bytes)

    def take(self, memory_bytes: int | None, wanted: int, *,
             kept: frozenset[int] = frozenset()) -> tuple[int, ...] | None:
        """The wanted least loaded GPUs, none of those kept, that take the job, now counted as holding it; None if
        too few."""
        fitting = sorted((load for load in self.loads.values() if load.index not in kept
                          and load.takes(memory_bytes, cap=self.cap, margin_bytes=self.margin_bytes)),
                         key=GpuLoad.order_key)
        if len(fitting) < wanted:
            return None
        for load in fitting[:wanted]:
            load.add(memory_bytes)
        return tuple(sorted(load.index for load in fitting[:wanted]))

    def keep(self, memory_bytes: int | None, wanted: int) -> frozenset[int]:
        """The GPUs kept for a job that must wait: the wanted least loaded of those large enough for it.

        No later job goes on them, so their load only falls until the job fits there: it is not starved, however
        many jobs come after it. The kept GPUs change only for ones less loaded still, whose load falls in turn."""
        large = [load for load in self.loads.values() if large_enough(load.total_bytes, memory_bytes)]
        return frozenset(load.index for load in sorted(large, key=GpuLoad.order_key)[:wanted])

    def why_waiting(self, memory_bytes: int | None, wanted: int) -> str:
        """Why a job that take() refused waits: a whole GPU for an unknown figure, else free memory or GPUs."""
        if memory_bytes is None:
            whole = "a whole free GPU" if wanted == 1 else f"{wanted} whole free GPUs"
            return f"waiting for {whole} (its memory is not measured yet)"
        short = [load for load in self.loads.values() if load.shareable(self.cap)
                 and not load.takes(memory_bytes, cap=self.cap, margin_bytes=self.margin_bytes)]
        if not short:  # full by count, or held whole: memory is not what it waits for
            full = sum(1 for load in self.loads.values() if load.jobs >= self.cap)
            cap_reached = f" (jobs_per_gpu = {self.cap} reached on {full} of {len(self.loads)})" if full else ""
            return f"waiting for {wanted} free GPU(s){cap_reached}"
        roomiest = min(short, key=lambda load: (-load.free_bytes, load.index))
        return (f"waiting for {wanted} GPU{'s' if wanted != 1 else ''} with "
                f"{gibibytes(memory_bytes + self.margin_bytes)} GiB free (most free: "
                f"{gibibytes(max(0, roomiest.free_bytes))} of {gibibytes(roomiest.total_bytes)} GiB "
                f"on GPU {roomiest.index})")


def place(candidates: list[Candidate], *, active_gpu_jobs: list[GpuHolding], active_cpu_jobs: int,
          gpu_indices: tuple[int, ...], gpu_memory_totals: dict[int, int | None], settings: Settings,
          now: float) -> Schedule:
    """Decide which queued jobs start now.

    CPU-only jobs take the free CPU slots. A GPU job takes the least loaded GPUs that its memory fits (Packing).
    The first GPU job that cannot be placed now keeps the GPUs it will start on (Packing.keep), and later GPU jobs
    start on the others where they fit (backfill): they pass it without taking what it waits for. A job that no
    GPUs of this machine can ever hold is held with its reason, keeping none.
    """
    cpu_free = settings.cpu_jobs - active_cpu_jobs
    packing = Packing(active_gpu_jobs, gpu_indices=gpu_indices, totals=gpu_memory_totals,
                      cap=settings.jobs_per_gpu, margin_bytes=int(settings.gpu_memory_margin_gib * GIB))
    totals = {index: gpu_memory_totals.get(index) for index in gpu_indices}
    start: list[Placement] = []
    waiting: dict[int, str] = {}
    first_waiting: int | None = None  # the first GPU job that must wait, and the GPUs kept for it
    kept: frozenset[int] = frozenset()
    for candidate in order(candidates):
        memory, wanted = candidate.gpu_memory_bytes, candidate.gpus_wanted
        if candidate.not_before > now:
            waiting[candidate.job_id] = f"restart backoff: {candidate.not_before - now:.1f} s left"
        elif wanted == 0:
            if cpu_free > 0:
                cpu_free -= 1
                start.append(Placement(candidate.job_id))
            else:
                waiting[candidate.job_id] = f"{CPU_WAIT} ({settings.cpu_jobs} in use)"
        elif shortfall := gpu_shortfall(wanted, memory, totals):
            waiting[candidate.job_id] = shortfall.held
        elif chosen := packing.take(memory, wanted, kept=kept):
            start.append(Placement(candidate.job_id, chosen))
        elif first_waiting is not None:
            waiting[candidate.job_id] = f"waiting behind job {first_waiting} for GPUs"
        else:
            first_waiting, kept = candidate.job_id, packing.keep(memory, wanted)
            waiting[candidate.job_id] = packing.why_waiting(memory, wanted)
    return Schedule(tuple(start), waiting)


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
