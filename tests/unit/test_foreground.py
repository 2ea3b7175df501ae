"""A foreground run's registration is believed only while its process lives and holds its run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

from rlsup import atomic, locks, paths
from rlsup.run import foreground


def registration_file(home: Path, run_dir: Path, *, pid: int, start_time: float) -> Path:
    """A registration as foreground.register writes one, for any pid and start time."""
    directory = paths.ensure_private_dir(home / paths.FOREGROUND)
    path = directory / f"{pid}-test.json"
    atomic.write_json(path, {"pid": pid, "start_time": start_time, "run_dir": str(run_dir), "name": "fg",
                                      "algo": "dqn", "env": "CartPole-v1", "total_steps": 1000, "started": 1.0})
    return path


def held_run(tmp_path: Path) -> tuple[Path, int]:
    """A run directory whose worker.lock this test process holds, as a foreground worker holds its own."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run_dir, locks.acquire(run_dir / paths.WORKER_LOCK)


def test_a_run_that_holds_its_lock_is_live(rlsup_home, tmp_path):
    run_dir, lock = held_run(tmp_path)
    try:
        path = registration_file(rlsup_home, run_dir, pid=os.getpid(), start_time=psutil.Process().create_time())
        [run] = foreground.live_runs(rlsup_home)
        assert (run.pid, run.run_dir, run.path) == (os.getpid(), run_dir, path)
    finally:
        os.close(lock)


def test_a_reused_pid_is_not_the_run_and_its_registration_goes(rlsup_home, tmp_path):
    # This process holds the lock under the registered pid, but it started at another time than the
    # registration says: the registered run died and its pid came round again.
    run_dir, lock = held_run(tmp_path)
    try:
        path = registration_file(rlsup_home, run_dir, pid=os.getpid(),
                                 start_time=psutil.Process().create_time() - 30)
        assert foreground.live_runs(rlsup_home) == []
        assert not path.exists()
    finally:
        os.close(lock)


def test_a_live_pid_that_holds_no_lock_is_not_the_run(rlsup_home, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    path = registration_file(rlsup_home, run_dir, pid=os.getpid(), start_time=psutil.Process().create_time())
    assert foreground.live_runs(rlsup_home) == []
    assert not path.exists()


def test_a_dead_process_is_not_shown_and_its_registration_goes(rlsup_home, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    # A child that takes the run's lock and is gone by the time anyone reads: as a SIGKILLed run.
    child = subprocess.run([sys.executable, "-c", "import os, psutil, sys; from rlsup import locks; "
                            f"locks.acquire({str(run_dir / paths.WORKER_LOCK)!r}); "
                            "print(os.getpid(), psutil.Process().create_time())"],
                           capture_output=True, text=True, check=True, env=dict(os.environ))
    pid, start_time = child.stdout.split()
    path = registration_file(rlsup_home, run_dir, pid=int(pid), start_time=float(start_time))
    assert foreground.live_runs(rlsup_home) == []
    assert not path.exists()


def test_a_file_rlsup_did_not_write_is_ignored_and_kept(rlsup_home):
    directory = paths.ensure_private_dir(rlsup_home / paths.FOREGROUND)
    (directory / "notes.json").write_text(json.dumps({"hello": 1}))
    (directory / ".1-abc.json.1.partial").write_text("{")
    assert foreground.live_runs(rlsup_home) == []
    assert sorted(os.listdir(directory)) == [".1-abc.json.1.partial", "notes.json"]


def test_reading_a_home_that_does_not_exist_creates_nothing(tmp_path):
    home = tmp_path / "no-home"
    assert foreground.live_runs(home) == []
    assert not home.exists()
