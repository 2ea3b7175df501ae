"""A daemon that stops or dies leaves workers running and adopts them again; crashed workers restart."""
from __future__ import annotations

import os
import signal
from pathlib import Path

from rlsup.run.exit import read_exit
from rlsup.jobs.state import State


def test_workers_survive_daemon_stop_and_sigkill_and_are_adopted(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    specs = [harness.job_file(f"survivor{index}", total_steps=1_000_000, checkpoint_every=0, seed=index)
             for index in range(2)]
    jobs = [harness.submit(spec) for spec in specs]
    for job in jobs:
        harness.wait_step(job.id, 200)
    pids = [harness.job(job.id).pid for job in jobs]

    # A clean stop leaves the workers running; a new daemon adopts them.
    code, out, _ = harness.cli("daemon", "stop")
    assert code == 0 and "keep running" in out
    assert all(_alive(pid) for pid in pids)
    harness.start_daemon()
    harness.wait_for(lambda: all(len(harness.events(job.id, "adopted")) == 1 for job in jobs), timeout=30,
                     what="both jobs adopted", report=harness.report)
    # A crash of the daemon (SIGKILL) does not touch them either.
    harness.kill_daemon()
    assert all(_alive(pid) for pid in pids)
    harness.start_daemon()
    harness.wait_for(lambda: all(len(harness.events(job.id, "adopted")) == 2 for job in jobs), timeout=30,
                     what="both jobs adopted twice", report=harness.report)
    assert [harness.job(job.id).pid for job in jobs] == pids
    assert harness.cli("daemon", "status")[0] == 0

    # The adopted workers take live edits by SIGHUP and finish; exit.json tells the daemon how.
    budgets = []
    for job, spec in zip(jobs, specs):
        # Room for the edit to arrive first: status.json is up to a second old, then come the debounce
        # and SIGHUP, and under load 1,500 steps went by before it (the worker then ends past the budget):
        # four times that.
        budget = harness.wait_step(job.id, 1).step + 6_000
        spec.write_text(spec.read_text().replace("total_steps = 1000000", f"total_steps = {budget}"))
        budgets.append(budget)
    for job, pid, budget in zip(jobs, pids, budgets):
        done = harness.wait_state(job.id, State.DONE, timeout=120)
        exit_record = read_exit(Path(done.run_dir))
        assert (exit_record.pid, exit_record.code, done.step) == (pid, 0, budget)
        assert [t for t in harness.transitions(job.id) if t[1] == "starting"] == [("queued", "starting")]


def test_a_crashed_worker_restarts_from_its_checkpoint_or_fails_without_restarts(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    # Long enough that it is still running when the test kills it, on however fast a CPU: the kill comes
    # within a few hundred steps of its first checkpoint (a restart that never came fails the test).
    resilient = harness.submit(harness.job_file("resilient", total_steps=8_000, checkpoint_every=500))
    fragile = harness.submit(harness.job_file("fragile", total_steps=1_000_000, max_restarts=0))
    harness.wait_for(lambda: harness.newest_checkpoint(harness.job(resilient.id).run_dir), timeout=120,
                     what="a first checkpoint", report=lambda: harness.report(resilient.id))
    harness.wait_step(fragile.id, 100)
    crashed_pid = harness.job(resilient.id).pid
    checkpoint_step = harness.newest_checkpoint(resilient.run_dir).step
    os.kill(crashed_pid, signal.SIGKILL)
    os.kill(harness.job(fragile.id).pid, signal.SIGKILL)

    failed = harness.wait_state(fragile.id, State.FAILED, timeout=30)
    assert "SIGKILL" in failed.reason and "no restarts left" in failed.reason
    assert "worker.log" in failed.reason  # the tail of the log comes with it
    assert failed.restarts == 0

    done = harness.wait_state(resilient.id, State.DONE, timeout=120)
    assert done.restarts == 1 and done.step == 8_000
    assert any("restart 1 of 3" in event.message for event in harness.events(resilient.id, "state"))
    log = (Path(done.run_dir) / "worker.log").read_text()
    assert f"resumed from step-{checkpoint_step:012d}" in log or f"(step {checkpoint_step}" in log
    assert read_exit(Path(done.run_dir)).pid != crashed_pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
