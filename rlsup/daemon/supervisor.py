"""Worker processes: spawn in their own session, signal, reap children, adopt survivors of a restart."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from rlsup import locks, paths, runfiles
from rlsup.jobstate import Exit

log = logging.getLogger("rlsup.daemon")

WORKER_COMMAND = (sys.executable, "-m", "rlsup.worker")
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


@dataclass
class Worker:
    """A worker process the daemon watches: its own child, or one adopted after a restart."""

    job_id: int
    pid: int
    start_time: float
    run_dir: Path
    popen: subprocess.Popen | None = None  # None when adopted: it cannot be wait()ed on

    @property
    def adopted(self) -> bool:
        return self.popen is None


def worker_environment(gpus: tuple[int, ...]) -> dict[str, str]:
    """The daemon's environment with the job's GPUs; "" hides every GPU from a CPU-only job."""
    environment = dict(os.environ)
    environment["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus)
    # CUDA numbers GPUs fastest first unless told otherwise; NVML, which placed the job, by PCI bus.
    environment["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    environment["PYTHONUNBUFFERED"] = "1"
    return environment


class Supervisor:
    """The set of live workers, keyed by job id."""

    def __init__(self, command: tuple[str, ...] = WORKER_COMMAND):
        self.command = tuple(command)
        self.workers: dict[int, Worker] = {}

    def spawn(self, job_id: int, run_dir: Path, gpus: tuple[int, ...] = ()) -> Worker:
        """Start `python -m rlsup.worker RUN_DIR` in its own session, output appended to worker.log."""
        run_dir = Path(run_dir)
        log_path = run_dir / paths.LOG_FILE
        descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            popen = subprocess.Popen([*self.command, str(run_dir)], stdin=subprocess.DEVNULL,
                                     stdout=descriptor, stderr=descriptor, start_new_session=True,
                                     env=worker_environment(gpus), cwd=run_dir, close_fds=True)
        finally:
            os.close(descriptor)
        start_time = process_start_time(popen.pid) or time.time()
        worker = Worker(job_id, popen.pid, start_time, run_dir, popen)
        self.workers[job_id] = worker
        log.info("job %s: spawned worker pid %s (gpus %s)", job_id, popen.pid, ",".join(map(str, gpus)) or "none")
        return worker

    def adopt(self, job_id: int, pid: int, start_time: float | None, run_dir: Path) -> Worker | None:
        """Watch a worker left by a previous daemon, if that very process is still alive."""
        if not same_process_alive(pid, start_time):
            return None
        worker = Worker(job_id, pid, start_time or process_start_time(pid) or 0.0, Path(run_dir))
        self.workers[job_id] = worker
        log.info("job %s: adopted worker pid %s", job_id, pid)
        return worker

    def run_lock_holder(self, run_dir: Path) -> locks.Holder:
        """Who holds a run's worker lock: the one worker training it, whoever started it."""
        return locks.holder(Path(run_dir) / paths.WORKER_LOCK)

    def alive(self, job_id: int) -> bool:
        worker = self.workers.get(job_id)
        if worker is None:
            return False
        if worker.popen is not None:
            return worker.popen.poll() is None
        return same_process_alive(worker.pid, worker.start_time)

    def send(self, job_id: int, number: int) -> bool:
        """Signal the worker process itself (SIGINT pauses, SIGHUP reloads); False when it is gone."""
        worker = self.workers.get(job_id)
        if worker is None or not self.alive(job_id):
            return False
        try:
            os.kill(worker.pid, number)
        except ProcessLookupError:
            return False
        log.info("job %s: sent %s to pid %s", job_id, signal.Signals(number).name, worker.pid)
        return True

    def kill(self, job_id: int) -> bool:
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

    def reap(self) -> list[tuple[Worker, Exit]]:
        """Workers that ended since the last call, with how they ended; they are forgotten."""
        ended = []
        for job_id, worker in list(self.workers.items()):
            outcome = self._ended(worker)
            if outcome is not None:
                del self.workers[job_id]
                ended.append((worker, outcome))
        return ended

    def _ended(self, worker: Worker) -> Exit | None:
        if worker.popen is not None:
            code = worker.popen.poll()
            if code is None:
                return None
            record = _exit_record(worker) or {}
            if code < 0:
                return Exit(signal=-code, step=record.get("step"))
            return Exit(code=code, step=record.get("step"), reason=record.get("reason"))
        if same_process_alive(worker.pid, worker.start_time):
            return None
        return exit_of_vanished(worker)  # not our child: exit.json is the only word on how it ended

    def forget(self, job_id: int) -> None:
        self.workers.pop(job_id, None)


def exit_of_vanished(worker: Worker) -> Exit:
    """How a worker that is not our child ended, from its exit.json; Exit() when it left none."""
    record = _exit_record(worker)
    if record is None:
        return Exit()
    return Exit(code=record.get("code"), step=record.get("step"), reason=record.get("reason"))


def _exit_record(worker: Worker) -> dict | None:
    """exit.json when this very worker wrote it (not a stale one from an earlier process)."""
    record = runfiles.read_exit(worker.run_dir)
    if record is None or record.get("pid") not in (None, worker.pid):
        return None
    if isinstance(record.get("time"), (int, float)) and record["time"] < worker.start_time - 1.0:
        return None
    return record
