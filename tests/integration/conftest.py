"""A real daemon in the test's RLSUP_HOME, tiny CartPole job files, and waiting on conditions."""
from __future__ import annotations

import contextlib
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import psutil
import pytest

from rlsup import cli, paths
from rlsup.run import files as runfiles
from rlsup.run.status import WorkerStatus, read_worker_status
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup import client
from rlsup.jobs.state import State
from rlsup.jobs.store import Job, Store
from rlsup_testing import cartpole_job, cartpole_text

FAST_SETTINGS = {"debounce_s": 0.3, "restart_backoff_s": 0.2, "tick_s": 0.05, "hardware_sample_s": 1.0}


def job_file(directory: Path, name: str, *, seed: int = 3, checkpoint_every: int = 500, **fields) -> Path:
    """The shared small CartPole job, with this suite's seed and checkpoint interval by default."""
    return cartpole_job(directory, name=name, seed=seed, checkpoint_every=checkpoint_every, **fields)


def job_text(*, seed: int = 3, checkpoint_every: int = 500, **fields) -> str:
    return cartpole_text(seed=seed, checkpoint_every=checkpoint_every, **fields)


class Harness:
    """Starts and kills real daemons for one RLSUP_HOME and reads what they record."""

    def __init__(self, home: Path, jobs_directory: Path):
        self.home = home
        self.jobs_directory = jobs_directory
        self.extra_environment: dict[str, str] = {}
        self.daemons: list[subprocess.Popen] = []
        self.store = Store(home)

    # -- the daemon --------------------------------------------------------------------------

    def settings(self, **values) -> None:
        lines = [f"{key} = {str(value).lower() if isinstance(value, bool) else repr(value)}"
                 for key, value in {**FAST_SETTINGS, **values}.items()]
        (self.home / paths.DAEMON_SETTINGS).write_text("\n".join(lines) + "\n")

    def start_daemon(self) -> subprocess.Popen:
        if not (self.home / paths.DAEMON_SETTINGS).exists():
            self.settings()
        environment = {**os.environ, "RLSUP_HOME": str(self.home), **self.extra_environment}
        process = subprocess.Popen([sys.executable, "-m", "rlsup.daemon"], env=environment,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   start_new_session=True)
        self.daemons.append(process)
        wait_for(lambda: client.daemon_status(self.home).pid == process.pid or process.poll() is not None,
                 timeout=30, what="the daemon to take its lock")
        assert process.poll() is None, process.stderr.read().decode()
        return process

    def kill_daemon(self) -> None:
        """SIGKILL, as a crash would: no clean-up at all."""
        status = client.daemon_status(self.home)
        assert status.running
        os.kill(status.pid, signal.SIGKILL)
        wait_for(lambda: not client.daemon_status(self.home).running, timeout=10, what="the daemon to die")

    # -- jobs --------------------------------------------------------------------------------

    def job_file(self, name: str, **fields) -> Path:
        return job_file(self.jobs_directory, name, **fields)

    job_text = staticmethod(job_text)
    wait_for = staticmethod(lambda *arguments, **options: wait_for(*arguments, **options))
    newest_checkpoint = staticmethod(lambda run_dir: newest_checkpoint(run_dir))

    def submit(self, path: Path, **options) -> Job:
        return client.submit(path, home=self.home, start_daemon=False, **options)

    def job(self, job_id: int) -> Job:
        return self.store.job(job_id)

    def wait_state(self, job_id: int, *states: State, timeout: float = 120) -> Job:
        wanted = {State(state) for state in states}
        return wait_for(lambda: _when(self.job(job_id), lambda job: job.state in wanted), timeout=timeout,
                        what=f"job {job_id} to reach {'/'.join(map(str, wanted))}", report=lambda: self.report(job_id))

    def wait_step(self, job_id: int, step: int, timeout: float = 120) -> WorkerStatus:
        """status.json of the job's live worker once it reports at least step."""
        def reached():
            job = self.job(job_id)
            status = read_worker_status(Path(job.run_dir)) or WorkerStatus()
            return status if status.pid == job.pid and (status.step or 0) >= step else None
        return wait_for(reached, timeout=timeout, what=f"job {job_id} to pass step {step}",
                        report=lambda: self.report(job_id))

    def events(self, job_id: int, kind: str | None = None) -> list:
        return [event for event in self.store.events(job_id, 1000) if kind is None or event.kind == kind]

    def transitions(self, job_id: int) -> list[tuple[str | None, str]]:
        return [(event.from_state, event.to_state) for event in self.events(job_id, "state")]

    def daemon_log(self) -> str:
        """daemon.log so far: empty until the daemon has set up its logging, which it does after taking its lock."""
        with contextlib.suppress(FileNotFoundError):
            return (self.home / paths.DAEMON_LOG).read_text()
        return ""

    def report(self, job_id: int | None = None) -> str:
        lines = ["daemon.log:", *runfiles.tail_lines(self.home / paths.DAEMON_LOG, 15)]
        for job in self.store.jobs():
            if job_id is None or job.id == job_id:
                lines += [f"job {job.id}: {job.state} ({job.reason!r})"]
                lines += [f"  {e.kind} {e.from_state}->{e.to_state} {e.message}" for e in self.events(job.id)]
                lines += ["  " + line for line in runfiles.tail_lines(Path(job.run_dir) / paths.LOG_FILE, 8)]
        return "\n".join(lines)

    def cli(self, *arguments: str) -> tuple[int, str, str]:
        """`rlsup ARGS` in this process, through the lead's parser: (exit code, stdout, stderr)."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([str(argument) for argument in arguments])
        return code, out.getvalue(), err.getvalue()

    # -- clean-up ----------------------------------------------------------------------------

    def clean_up(self) -> None:
        """Kill every daemon and worker this home ever had: no process outlives its test."""
        status = client.daemon_status(self.home)
        pids = {process.pid for process in self.daemons} | ({status.pid} if status.pid else set())
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for process in self.daemons:
            process.wait(timeout=10)
            process.stderr.close()
        jobs = []
        with contextlib.suppress(sqlite3.Error):  # a test that damages the store still has its workers killed
            jobs = self.store.jobs()
        for pid in worker_pids(self.home, jobs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.store.close()


def worker_pids(home: Path, jobs: Iterable[Job]) -> set[int]:
    """Workers recorded in the store, and any process still running on a run directory of this home."""
    pids = {job.pid for job in jobs if job.pid}
    for process in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error, TypeError):
            if any(str(home) in part for part in process.info["cmdline"] or ()):
                pids.add(process.info["pid"])
    pids.discard(os.getpid())
    return pids


def _when(value, predicate):
    return value if value is not None and predicate(value) else None


def wait_for(condition: Callable[[], object], *, timeout: float = 60, interval: float = 0.05,
             what: str = "a condition", report: Callable[[], str] | None = None):
    """Poll until condition() is truthy and return it; fail with a report after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}\n" + (report() if report else ""))
        time.sleep(interval)


def newest_checkpoint(run_dir: str | Path):
    entries = list_checkpoints(Path(run_dir))
    return entries[-1] if entries else None


@pytest.fixture
def harness(rlsup_home: Path, tmp_path: Path) -> Harness:
    """Helpers are reached through this fixture: test modules import nothing from conftest."""
    jobs_directory = tmp_path / "jobs"
    jobs_directory.mkdir()
    made = Harness(rlsup_home, jobs_directory)
    try:
        yield made
    finally:
        made.clean_up()


@pytest.fixture(scope="module")
def ray_head():
    """A real Ray head on loopback (tests/ray_head.py), one per test module; the test skips without ray."""
    from ray_head import started_head

    head = started_head()
    try:
        yield head
    finally:
        head.stop()
