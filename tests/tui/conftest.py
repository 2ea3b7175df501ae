"""TUI test fixtures: a home with a real daemon torn down after each test, job files, and waiting on the UI."""
from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Callable

import psutil
import pytest
from rlsup_testing import cartpole_job

from rlsup import paths
from rlsup import client
from rlsup.jobs.store import Store

# Quick to react without busy-polling a machine the test shares with others.
DAEMON_SETTINGS = """\
debounce_s = 0.3
restart_backoff_s = 0.2
tick_s = 0.1
hardware_sample_s = 5.0
"""

# Small and slow to finish: still running whenever a test pauses it.
@pytest.fixture
def daemon_home(rlsup_home: Path):
    """RLSUP_HOME with fast daemon settings; whatever daemon and workers the test started are killed after it."""
    (rlsup_home / paths.DAEMON_SETTINGS).write_text(DAEMON_SETTINGS)
    try:
        yield rlsup_home
    finally:
        kill_everything(rlsup_home)


@pytest.fixture
def job_file(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str = "cartpole", total_steps: int = 200_000) -> Path:
        return cartpole_job(tmp_path, name=name, total_steps=total_steps, seed=3, checkpoint_every=100_000)
    return make


@pytest.fixture
def wait_until():
    """await wait_until(pilot, condition, what=...): let the app run until condition() holds, or fail."""
    async def wait(pilot, condition: Callable[[], object], *, what: str, timeout: float = 90.0,
                   report: Callable[[], str] = lambda: ""):
        deadline = time.monotonic() + timeout
        while not condition():
            if pilot.app._exception is not None:  # the app crashed: its error says more than a timeout
                raise pilot.app._exception
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{report()}")
            await pilot.pause(0.1)
    return wait


def kill_everything(home: Path) -> None:
    """SIGKILL this home's daemon and every worker of it, and wait until they are gone."""
    processes = []
    status = client.daemon_status(home)
    if status.pid:
        processes += _processes([status.pid], lambda process: True)
    with Store(home) as store:
        recorded = [job.pid for job in store.jobs() if job.pid]
    # A pid from the store may have been reused: only a process naming this home is ours.
    processes += _processes(recorded, lambda process: _mentions(process, home))
    processes += [process for process in psutil.process_iter() if _mentions(process, home)]
    for process in {process.pid: process for process in processes}.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # workers lead their own session, helpers included
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(processes, timeout=10)


def _processes(pids, accept) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if accept(process):
                found.append(process)
    return found


def _mentions(process: psutil.Process, home: Path) -> bool:
    with contextlib.suppress(psutil.Error):
        return process.pid != os.getpid() and any(str(home) in part for part in process.cmdline())
    return False
