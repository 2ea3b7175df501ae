"""status.json is a claim, not a fact: anyone who can write a run can write it in its worker's name (issue 49)."""
from __future__ import annotations

from pathlib import Path

from rlsup_testing import alive, forge_status

from rlsup.jobs.state import State


def test_a_forged_step_at_the_budget_moves_no_job_to_stopping(harness) -> None:
    """issue 49 item 9: a status.json with the worker's pid and a step at its budget moved the job to `stopping`
    ("budget reached at step 40000" beside its real step) while the worker trained on. The worker ends itself at
    its budget, and its exit says so; a number of 400 digits in the file failed the job and killed its worker."""
    harness.start_daemon()
    job = harness.submit(harness.job_file("claimed", total_steps=1_000_000, checkpoint_every=0))
    real_step = harness.wait_step(job.id, 100).step
    pid = harness.job(job.id).pid
    forge_status(Path(job.run_dir), pid, 2.0, step=1_000_000, total_steps=1_000_000)
    forge_status(Path(job.run_dir), pid, 1.0, step=40_000, total_steps=1)
    forge_status(Path(job.run_dir), pid, 1.0, step=10 ** 400, total_steps=10 ** 400)

    assert ("running", "stopping") not in harness.transitions(job.id), harness.report(job.id)
    running = harness.job(job.id)
    assert (running.state, running.pid) == (State.RUNNING, pid) and alive(pid), harness.report(job.id)
    assert not [event for event in harness.events(job.id) if "budget reached" in event.message]
    # The worker goes on training and reports its real step again.
    assert harness.wait_step(job.id, real_step + 100).pid == pid
    assert harness.cli("kill", str(job.id))[0] == 0
    harness.wait_state(job.id, State.KILLED, timeout=60)
