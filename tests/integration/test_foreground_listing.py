"""`rlsup list` shows a foreground `rlsup run` marked foreground while it trains, and never after it ends."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from rlsup_testing import cartpole_job, rlsup_command, run_rlsup, wait_for

from rlsup import paths
from rlsup.run.exit import EXIT_PAUSED


@pytest.fixture
def foreground_run(tmp_path):
    """start() runs `rlsup run` on a long CartPole job in the test's home; it is killed after the test."""
    started: list[subprocess.Popen] = []

    def start(name: str = "fg-cartpole") -> tuple[subprocess.Popen, Path]:
        run_dir = tmp_path / name
        output = open(tmp_path / f"{name}.out", "w")
        process = subprocess.Popen(rlsup_command("run", cartpole_job(tmp_path, name=name, total_steps=10_000_000),
                                                 "--run-dir", run_dir),
                                   stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy())
        output.close()
        started.append(process)
        return process, run_dir

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def listed() -> list[dict]:
    result = run_rlsup("list", "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def wait_until_listed_running(process: subprocess.Popen) -> dict:
    def running():
        assert process.poll() is None, "the foreground run ended early"
        return next((entry for entry in listed() if entry["pid"] == process.pid and entry["state"] == "running"
                     and entry["step"] > 0), None)
    return wait_for(running, timeout=120, interval=0.3, what="the foreground run listed as running")


def registrations(home: Path) -> list[str]:
    directory = home / paths.FOREGROUND
    return sorted(name for name in os.listdir(directory) if not name.startswith(".")) if directory.exists() else []


def test_a_live_foreground_run_is_listed_marked_foreground_until_it_pauses(foreground_run, rlsup_home):
    process, run_dir = foreground_run()
    entry = wait_until_listed_running(process)
    assert entry["foreground"] is True and entry["id"] is None
    assert (entry["name"], entry["algo"], entry["env"]) == ("fg-cartpole", "dqn", "CartPole-v1")
    assert entry["run_dir"] == str(run_dir) and entry["total_steps"] == 10_000_000
    table = run_rlsup("list")
    row = next(line for line in table.stdout.splitlines() if str(run_dir) in line)
    assert row.split()[0] == "fg" and "running (foreground)" in row, table.stdout
    assert "daemon is not running" not in table.stderr  # the daemon has nothing to do with it
    for command, advice in ((("pause", run_dir), "press Ctrl-C in its terminal to pause it"),
                            (("kill", run_dir), "press Ctrl-C twice in its terminal"),
                            (("status", run_dir), f"`rlsup list` shows it, and its log is {run_dir}/worker.log")):
        said = run_rlsup(*command)
        assert said.returncode == 1 and "Traceback" not in said.stderr, said.stderr
        assert f"is a foreground run (`rlsup run`, pid {process.pid}), not the daemon's: {advice}" in said.stderr

    process.send_signal(signal.SIGINT)  # Ctrl-C: a checkpoint, then exit 75
    assert process.wait(timeout=120) == EXIT_PAUSED
    assert listed() == []
    assert registrations(rlsup_home) == []
    assert str(run_dir) not in run_rlsup("list").stdout


def test_a_sigkilled_foreground_run_is_never_listed_again(foreground_run, rlsup_home):
    process, run_dir = foreground_run()
    wait_until_listed_running(process)
    assert len(registrations(rlsup_home)) == 1
    process.kill()  # nothing of it runs again: its registration stays behind
    process.wait(timeout=30)
    assert len(registrations(rlsup_home)) == 1
    assert listed() == []
    assert registrations(rlsup_home) == []  # the stale registration was removed by the reader
    table = run_rlsup("list")
    assert "foreground" not in table.stdout and str(run_dir) not in table.stdout


def test_a_foreground_run_beside_a_queued_job_keeps_the_job_s_id(foreground_run, rlsup_home, tmp_path):
    from rlsup.jobs.store import Store

    with Store(rlsup_home) as store:
        queued = store.submit(name="queued", spec_path=tmp_path / "queued.toml", run_dir=tmp_path / "queued",
                              algo="dqn", env="CartPole-v1", total_steps=1000)
    process, _ = foreground_run()
    wait_until_listed_running(process)
    entries = {entry["name"]: entry for entry in listed()}
    assert (entries["queued"]["id"], entries["queued"]["foreground"]) == (queued.id, False)
    assert entries["fg-cartpole"]["foreground"] is True


def test_a_foreground_run_named_in_a_command_is_found_and_the_answer_says_what_to_do(foreground_run, rlsup_home):
    process, run_dir = foreground_run("fg")
    wait_until_listed_running(process)
    for command, advice in ((("pause", "fg"), f"press Ctrl-C in its terminal to pause it with a checkpoint "
                                              f"(from another terminal: kill -INT {process.pid})"),
                            (("kill", "fg"), "press Ctrl-C twice in its terminal"),
                            (("status", "fg"), f"`rlsup list` shows it, and its log is {run_dir}/worker.log")):
        said = run_rlsup(*command)
        assert said.returncode == 1 and "Traceback" not in said.stderr, said.stderr
        assert f"rlsup: fg is a foreground run (`rlsup run`, pid {process.pid}), not the daemon's: {advice}" in \
            said.stderr, said.stderr
