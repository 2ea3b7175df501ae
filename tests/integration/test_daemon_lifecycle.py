"""A real daemon and real workers: submit to done, pause and resume bit-exactly, the light `rlsup list`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup.jobs.state import State


def test_submit_runs_to_done_and_the_cli_reports_it(harness) -> None:
    harness.start_daemon()
    spec = harness.job_file("first", total_steps=1_500)
    code, out, err = harness.cli("submit", spec, "--name", "straight", "--priority", "2")
    assert code == 0, err
    job_id = int(out.strip())

    done = harness.wait_state(job_id, State.DONE)
    assert (done.name, done.priority, done.step, done.pid, done.gpus) == ("straight", 2, 1_500, None, "")
    transitions = harness.transitions(job_id)
    assert transitions[:3] == [(None, "queued"), ("queued", "starting"), ("starting", "running")]
    # Its worker's exit says it reached the budget; a status.json saying so is a claim (issue 49 item 9).
    assert transitions[3:] == [("running", "done")]
    assert read_exit(Path(done.run_dir)).code == 0
    assert harness.newest_checkpoint(done.run_dir).reason == "final"

    code, out, _ = harness.cli("list", "--json")
    (row,) = json.loads(out)
    assert {key: row[key] for key in ("id", "name", "state", "step", "total_steps", "run_dir", "pid")} == {
        "id": job_id, "name": "straight", "state": "done", "step": 1_500, "total_steps": 1_500,
        "run_dir": done.run_dir, "pid": None}
    code, out, _ = harness.cli("list")
    assert "straight" in out and "1,500/1,500" in out and "done" in out

    for reference in (str(job_id), "straight", done.run_dir):
        code, out, _ = harness.cli("status", reference)
        assert code == 0 and "-> done" in out
        assert "final" in out  # the checkpoint list
    code, out, _ = harness.cli("logs", "straight", "-n", "5")
    assert code == 0 and "reached the budget" in out
    assert harness.cli("status", "nobody")[0] == 1


def test_an_invalid_file_is_refused_and_nothing_is_queued(harness) -> None:
    broken = harness.jobs_directory / "broken.toml"
    broken.write_text("[job]\ntotal_steps = -5\n[dqn]\nlr = \"fast\"\n")
    code, out, err = harness.cli("submit", broken)
    assert code == 2 and out == ""
    assert f"{broken}:2: job.total_steps:" in err and f"{broken}:4: dqn.lr:" in err
    assert harness.store.jobs() == []
    runs = harness.home / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_pause_then_resume_matches_a_run_never_paused(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    # Room for the pause to land: the CLI's start-up under load lasted as long as 2,000 steps, and a
    # pause that arrives after the budget is reached finds the job done.
    total = 12_000
    straight = harness.submit(harness.job_file("straight", total_steps=total, checkpoint_every=0))
    paused = harness.submit(harness.job_file("paused", total_steps=total, checkpoint_every=0))

    harness.wait_step(paused.id, 700)
    first_pid = harness.job(paused.id).pid
    code, out, _ = harness.cli("pause", "paused")
    assert code == 0 and "pause requested" in out
    resting = harness.wait_state(paused.id, State.PAUSED, timeout=60)
    run_dir = Path(resting.run_dir)
    checkpoint = harness.newest_checkpoint(run_dir)
    assert checkpoint.reason == "pause" and 700 <= checkpoint.step < total
    assert read_exit(run_dir).code == EXIT_PAUSED
    assert ("running", "pausing") in harness.transitions(paused.id)

    code, _, _ = harness.cli("resume", str(paused.id))
    assert code == 0
    finished = harness.wait_state(paused.id, State.DONE)
    reference = harness.wait_state(straight.id, State.DONE)
    assert finished.restarts == 0
    assert [t for t in harness.transitions(paused.id) if t[1] == "starting"] == [("queued", "starting")] * 2
    assert harness.newest_checkpoint(run_dir).fingerprint == harness.newest_checkpoint(reference.run_dir).fingerprint
    assert first_pid != read_exit(run_dir).pid


def test_kill_stops_at_once_without_a_checkpoint(harness) -> None:
    harness.start_daemon()
    job = harness.submit(harness.job_file("doomed", total_steps=1_000_000, checkpoint_every=0))
    harness.wait_step(job.id, 300)
    pid = harness.job(job.id).pid
    assert harness.cli("kill", "doomed")[0] == 0
    killed = harness.wait_state(job.id, State.KILLED, timeout=30)
    assert killed.pid is None and harness.newest_checkpoint(killed.run_dir) is None
    harness.wait_for(lambda: not _alive(pid), timeout=10, what="the worker to be gone")
    assert harness.cli("resume", "doomed")[0] == 0  # a killed job may be started again
    harness.wait_state(job.id, State.STARTING, State.RUNNING, timeout=30)
    assert harness.cli("kill", "doomed")[0] == 0
    harness.wait_state(job.id, State.KILLED, timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_rlsup_list_is_light(harness) -> None:
    harness.submit(harness.job_file("listed"))
    code = ("import sys, time; start = time.perf_counter(); from rlsup.cli import main; main(['list']);"
            "print('elapsed', time.perf_counter() - start);"
            "print('heavy', sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'gymnasium', 'textual')))")
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "RLSUP_HOME": str(harness.home)})
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr
    assert "listed" in result.stdout and "queued" in result.stdout
    assert "heavy []" in result.stdout
    print(f"rlsup list: {wall:.2f} s wall including interpreter start; {result.stdout.splitlines()[-2]}")


def test_one_daemon_per_home(harness) -> None:
    first = harness.start_daemon()
    second = subprocess.run([sys.executable, "-m", "rlsup.daemon"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "RLSUP_HOME": str(harness.home)})
    assert second.returncode == 0 and "already runs" in second.stderr
    code, out, _ = harness.cli("daemon", "start")  # finds the running one, starts nothing
    assert code == 0 and f"pid {first.pid}" in out
    assert harness.cli("daemon", "stop")[0] == 0
    assert harness.cli("daemon", "status")[0] == 3
    assert first.wait(timeout=10) == 0
