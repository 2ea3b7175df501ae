"""A JobRunner whose workers exist only in the test: they report and end when the test says."""
from __future__ import annotations

import itertools
import time
from pathlib import Path

from rlsup.run.status import WorkerStatus, write_worker_status
from rlsup.daemon.runner import Signal, WorkerHandle
from rlsup.jobs.state import Exit

SIGKILL = 9


class FakeRunner:
    """Workers that exist only in this object: they report and end when the test says."""

    boot_id = "test-boot"

    def __init__(self, survivors: set[int] = frozenset()):
        self.survivors = set(survivors)          # pids still alive from before a daemon restart
        self.followed: dict[int, WorkerHandle] = {}
        self.exits: dict[int, Exit] = {}         # ended, waiting to be reaped
        self.lost_exits: dict[int, Exit] = {}    # what exit.json says of a pid no longer followed
        self.signals: list[tuple[int, Signal]] = []
        self.gpus: dict[int, tuple[int, ...]] = {}
        self.pids = itertools.count(1000)

    # -- the JobRunner protocol --------------------------------------------------------------

    def ready_to_start(self, run_dir: Path) -> bool:
        return True

    def start(self, job_id: int, run_dir: Path, gpus: tuple[int, ...]) -> WorkerHandle:
        self.gpus[job_id] = gpus
        return self._follow(WorkerHandle(job_id, next(self.pids), time.time(), self.boot_id, Path(run_dir)))

    def adopt(self, recorded: WorkerHandle) -> bool:
        if recorded.boot_id != self.boot_id or recorded.pid not in self.survivors:
            return False
        self._follow(recorded)
        return True

    def adopt_run_holder(self, job_id: int, run_dir: Path) -> WorkerHandle | None:
        return None

    def run_held(self, run_dir: Path) -> bool:
        return any(handle.run_dir == Path(run_dir) for handle in self.followed.values())

    def handle(self, job_id: int) -> WorkerHandle | None:
        return self.followed.get(job_id)

    def handles(self) -> list[WorkerHandle]:
        return list(self.followed.values())

    def signal(self, job_id: int, kind: Signal) -> bool:
        if job_id not in self.followed or job_id in self.exits:
            return False
        self.signals.append((job_id, Signal(kind)))
        if kind is Signal.KILL:
            self.exits[job_id] = Exit(signal=SIGKILL)
        return True

    def reap(self) -> list[tuple[WorkerHandle, Exit]]:
        return [(self.followed.pop(job_id), self.exits.pop(job_id)) for job_id in list(self.exits)]

    def exit_of_lost(self, recorded: WorkerHandle) -> Exit:
        return self.lost_exits.get(recorded.pid, Exit())

    def forget(self, job_id: int) -> None:
        self.followed.pop(job_id, None)
        self.exits.pop(job_id, None)

    def log_tail(self, run_dir: Path, lines: int) -> list[str]:
        return ["Traceback (most recent call last):", "RuntimeError: the fake worker broke"][-lines:]

    # -- what the test makes the workers do ---------------------------------------------------

    def _follow(self, handle: WorkerHandle) -> WorkerHandle:
        self.followed[handle.job_id] = handle
        return handle

    def report(self, job_id: int, step: int, total_steps: int | None = None, **extra) -> None:
        """The worker's status.json, as a live worker rewrites it."""
        handle = self.followed[job_id]
        status = {"pid": handle.pid, "step": step, "total_steps": total_steps, **extra}
        write_worker_status(handle.run_dir, WorkerStatus.from_json(status))

    def end(self, job_id: int, code: int | None = None, step: int | None = None, reason: str | None = None) -> None:
        self.exits[job_id] = Exit(code=code, step=step, reason=reason)

    def sent(self, job_id: int) -> list[Signal]:
        return [kind for number, kind in self.signals if number == job_id]
