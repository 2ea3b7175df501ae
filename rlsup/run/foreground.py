"""Foreground runs (`rlsup run`) registered under RLSUP_HOME, so that `rlsup list` and the TUI show them.

A run registers itself with one small file, written atomically and removed when it ends. A file can
outlive its run (SIGKILL, a power cut), so a reader trusts a registration only while the run's
worker.lock is held by the registered pid and that pid is still the process started at the
registered time; anything else is stale, never shown, and removed.
"""
from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from rlsup import atomic, locks, own_files, paths
from rlsup.spec import JobSpec, sanitize_name

# psutil derives create_time from boot time and clock ticks: equal for one process, to rounding
# (the daemon's supervisor recognises its workers with the same tolerance).
START_TIME_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class Registration:
    """A foreground run as its registration file describes it."""

    path: Path          # the registration file itself
    pid: int
    start_time: float   # the process's psutil create_time: a later process given the same pid differs
    run_dir: Path
    name: str
    algo: str
    env: str
    total_steps: int
    started: float      # wall time of the registration


def register(run_dir: Path, spec: JobSpec, home: Path | None = None) -> Path:
    """Announce this process as the foreground run of run_dir; returns the file to remove at exit."""
    directory = paths.ensure_private_dir((home or paths.rlsup_home()) / paths.FOREGROUND)
    # The random part keeps names unique when a pid comes round again, so a reader removing a stale
    # file can never remove a newer run's file of the same pid.
    path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    atomic.write_json(path, {
        "pid": os.getpid(), "start_time": psutil.Process().create_time(), "run_dir": str(Path(run_dir).resolve()),
        "name": sanitize_name(spec.job.name), "algo": spec.job.algo, "env": spec.env.id,
        "total_steps": spec.job.total_steps, "started": time.time()})
    return path


def unregister(path: Path | None) -> None:
    """Remove this run's registration. One that cannot be removed is stale once the process ends, and the
    next reader removes it."""
    if path is not None:
        forget(path)


def live_runs(home: Path | None = None) -> list[Registration]:
    """The registered foreground runs still training, oldest first; stale registrations are removed.

    Reads without creating anything: a home or a registry that does not exist has no runs.
    """
    directory = (home or paths.home_path()) / paths.FOREGROUND
    try:
        names = sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    runs = []
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue  # a registration being written (atomic.write_json's temporary file)
        registration = parse(directory / name)
        if registration is None:
            continue  # not a registration rlsup wrote: not ours to remove either
        if is_alive(registration):
            runs.append(registration)
        else:
            forget(registration.path)
    return sorted(runs, key=lambda run: run.started)


def parse(path: Path) -> Registration | None:
    raw = own_files.read_json(path)
    if raw is None:
        return None
    try:
        return Registration(path=path, pid=int(raw["pid"]), start_time=float(raw["start_time"]),
                            run_dir=Path(str(raw["run_dir"])), name=str(raw["name"]), algo=str(raw["algo"]),
                            env=str(raw["env"]), total_steps=int(raw["total_steps"]), started=float(raw["started"]))
    except (KeyError, TypeError, ValueError):
        return None


def is_alive(registration: Registration) -> bool:
    """The registered process still runs and still holds its run: a dead one (SIGKILL, a crash) let go of
    the lock as it died, and a process given its pid later has another start time."""
    holder = locks.holder(registration.run_dir / paths.WORKER_LOCK)
    if not holder.held or holder.pid != registration.pid:
        return False
    try:
        started = psutil.Process(registration.pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return abs(started - registration.start_time) <= START_TIME_TOLERANCE_S


def forget(path: Path) -> None:
    """Remove a stale registration; a home this user cannot write keeps it, and readers go on ignoring it."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass
