"""The local JobRunner: workers as processes in their own session; spawn, signal, reap, adopt after a restart."""
from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from rlsup import locks, own_files, paths
from rlsup.run import import_trust
from rlsup.run import files as runfiles
from rlsup.daemon.runner import Signal, WorkerHandle
from rlsup.daemon.warm_start import ForkedWorker, WarmStart
from rlsup.jobs.state import Exit
from rlsup.run.exit import ExitRecord, read_exit
from rlsup.run.signals import PAUSE_SIGNAL, RELOAD_SIGNAL, starting_held

log = logging.getLogger("rlsup.daemon")

WORKER_COMMAND = tuple(import_trust.module_command("rlsup.worker"))
# psutil derives create_time from boot time and clock ticks: equal for one process, to rounding.
START_TIME_TOLERANCE_S = 0.05


def boot_id() -> str:
    """Identifies this boot, so a pid recorded before a reboot is never taken for a live worker."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return f"boot-{psutil.boot_time():.0f}"


def process_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_process_alive(pid: int, start_time: float | None) -> bool:
    """The pid is alive, not a zombie, and is the process that was started at start_time."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    return start_time is None or abs(created - start_time) <= START_TIME_TOLERANCE_S


def worker_environment(gpus: tuple[int, ...], run_dir: Path) -> dict[str, str]:
    """The daemon's environment with the job's GPUs ("" hides every GPU from a CPU-only job), and a PYTHONPATH
    without the run."""
    environment = dict(os.environ)
    import_trust.without_run(environment, run_dir)
    environment["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus)
    # CUDA numbers GPUs fastest first unless told otherwise; NVML, which placed the job, by PCI bus.
    environment["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


def worker_directory() -> Path:
    """The workers' cwd: this home, which only its user writes. Never the run: a run directory may come from
    someone else, and Python before 3.11 puts the cwd of `-m` first on sys.path (a `gymnasium.py` dropped into
    a paused job's run ran at its resume), as every `-c` child (env processes, V-trace actors) does on any."""
    return paths.home_path()


class LocalRunner:
    """Workers as local processes in their own session, followed by job id (the JobRunner of one machine)."""

    def __init__(self, command: tuple[str, ...] = WORKER_COMMAND, *, warm_start: bool = False):
        self.command = tuple(command)
        self.boot_id = boot_id()
        self.workers: dict[int, WorkerHandle] = {}
        # Our own children (they can be wait()ed on), and those of our fork server, which relays their ends.
        self.children: dict[int, subprocess.Popen | ForkedWorker] = {}
        self.warm = WarmStart(self.command, worker_environment((), worker_directory()), worker_directory()) \
            if warm_start else None

    def ready_to_start(self, run_dir: Path) -> bool:
        """False while the fork server imports: the job waits rather than import torch a second time beside it."""
        return self.warm is None or not self.warm.warming()

    def start(self, job_id: int, run_dir: Path, gpus: tuple[int, ...] = ()) -> WorkerHandle:
        """Start `python -m rlsup.worker RUN_DIR` in its own session, output appended to worker.log: forked by
        the warm start's server where there is one, else a fresh interpreter."""
        run_dir = Path(run_dir)
        environment = worker_environment(gpus, run_dir)
        descriptor = own_files.open_own(run_dir / paths.LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            child = self.warm.fork(run_dir, environment, worker_directory(), descriptor) if self.warm else None
            if child is None:
                with starting_held():  # a stop or reload sent while it starts waits until it listens
                    child = subprocess.Popen([*self.command, str(run_dir)], stdin=subprocess.DEVNULL,
                                             stdout=descriptor, stderr=descriptor, start_new_session=True,
                                             env=environment, cwd=worker_directory(), close_fds=True)
        finally:
            os.close(descriptor)
        start_time = process_start_time(child.pid) or time.time()
        worker = self._follow(WorkerHandle(job_id, child.pid, start_time, self.boot_id, run_dir))
        self.children[job_id] = child
        log.info("job %s: spawned worker pid %s (gpus %s%s)", job_id, child.pid, ",".join(map(str, gpus)) or "none",
                 "; warm" if isinstance(child, ForkedWorker) else "")
        return worker

    def adopt(self, recorded: WorkerHandle) -> bool:
        """Follow a worker left by a previous daemon, if that very process is still alive on this boot."""
        if recorded.boot_id != self.boot_id or not same_process_alive(recorded.pid, recorded.start_time):
            return False
        start_time = recorded.start_time or process_start_time(recorded.pid) or 0.0
        self._follow(dataclasses.replace(recorded, start_time=start_time))
        log.info("job %s: adopted worker pid %s", recorded.job_id, recorded.pid)
        return True

    def adopt_run_holder(self, job_id: int, run_dir: Path) -> WorkerHandle | None:
        holder = locks.holder(Path(run_dir) / paths.WORKER_LOCK)
        if not holder.pid or not same_process_alive(holder.pid, None):
            return None
        start_time = process_start_time(holder.pid) or 0.0
        log.info("job %s: adopted worker pid %s holding the run", job_id, holder.pid)
        return self._follow(WorkerHandle(job_id, holder.pid, start_time, self.boot_id, Path(run_dir)))

    def run_held(self, run_dir: Path) -> bool:
        """The run's worker lock is held: by the one worker training it, whoever started it."""
        return locks.holder(Path(run_dir) / paths.WORKER_LOCK).held

    def handle(self, job_id: int) -> WorkerHandle | None:
        return self.workers.get(job_id)

    def handles(self) -> list[WorkerHandle]:
        return list(self.workers.values())

    def _follow(self, worker: WorkerHandle) -> WorkerHandle:
        self.children.pop(worker.job_id, None)
        self.workers[worker.job_id] = worker
        return worker

    def alive(self, job_id: int) -> bool:
        worker = self.workers.get(job_id)
        if worker is None:
            return False
        if job_id in self.children:
            return self.children[job_id].poll() is None
        return same_process_alive(worker.pid, worker.start_time)

    def signal(self, job_id: int, kind: Signal) -> bool:
        """SIGINT pauses and SIGHUP reloads the worker itself; a kill takes its whole session."""
        if Signal(kind) is Signal.KILL:
            return self._kill(job_id)
        number = PAUSE_SIGNAL if kind is Signal.PAUSE else RELOAD_SIGNAL
        worker = self.workers.get(job_id)
        if worker is None or not self.alive(job_id):
            return False
        try:
            os.kill(worker.pid, number)
        except ProcessLookupError:
            return False
        log.info("job %s: sent %s to pid %s", job_id, number.name, worker.pid)
        return True

    def _kill(self, job_id: int) -> bool:
        """SIGKILL the worker's whole process group (its session): no checkpoint, helpers included."""
        worker = self.workers.get(job_id)
        if worker is None or not self.alive(job_id):
            return False
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                return False
        log.info("job %s: killed process group %s", job_id, worker.pid)
        return True

    def reap(self) -> list[tuple[WorkerHandle, Exit]]:
        if self.warm is not None:
            self.warm.drain()
        ended = []
        for job_id, worker in list(self.workers.items()):
            outcome = self._ended(worker)
            if outcome is not None:
                self.forget(job_id)
                ended.append((worker, outcome))
        return ended

    def _ended(self, worker: WorkerHandle) -> Exit | None:
        child = self.children.get(worker.job_id)
        if (isinstance(child, ForkedWorker) and child.poll() is None
                and not child.relayed(same_process_alive(worker.pid, worker.start_time))):
            del self.children[worker.job_id]  # its server has gone: exit.json tells, as for an adopted worker
            child = None
        if child is not None:
            code = child.poll()
            if code is None:
                return None
            record = exit_record(worker)
            step, reason, held = (record.step, record.reason, record.held) if record else (None, None, False)
            if code < 0:
                return Exit(signal=-code, step=step)
            return Exit(code=code, step=step, reason=reason, held=held)
        if same_process_alive(worker.pid, worker.start_time):
            return None
        return self.exit_of_lost(worker)  # not our child: exit.json is the only word on how it ended

    def exit_of_lost(self, recorded: WorkerHandle) -> Exit:
        """How a worker that is not our child ended, from its exit.json; Exit() when it left none."""
        return exit_from_record(recorded) or Exit()

    def forget(self, job_id: int) -> None:
        self.workers.pop(job_id, None)
        self.children.pop(job_id, None)

    def log_tail(self, run_dir: Path, lines: int) -> list[str]:
        return runfiles.tail_lines(Path(run_dir) / paths.LOG_FILE, lines, limit=runfiles.QUOTED_TAIL_BYTES)


def exit_record(worker: WorkerHandle) -> ExitRecord | None:
    """exit.json when this very worker wrote it (not a stale one from an earlier process).

    A worker whose pid is not known yet (pid 0: one on a cluster) is recognised by the time alone.
    """
    record = read_exit(worker.run_dir)
    if record is None or (worker.pid and record.pid not in (None, worker.pid)):
        return None
    start_time = worker.start_time or 0.0
    if record.time is not None and record.time < start_time - 1.0:
        return None
    return record


def exit_from_record(worker: WorkerHandle) -> Exit | None:
    """How the worker ended as its own exit.json says, or None when it left none."""
    record = exit_record(worker)
    if record is None:
        return None
    return Exit(code=record.code, step=record.step, reason=record.reason, held=record.held)
