"""Editing a submitted job file on disk while the job runs, and after it is done (DESIGN.md section 5)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlsup.run.exit import read_exit
from rlsup.run.status import WorkerStatus, read_worker_status
from rlsup.jobs.state import State


def line_of(text: str, start: str) -> int:
    return next(number for number, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def refused_after(harness, job_id: int, count: int) -> str:
    """The message of the job's refused event number count + 1, once it exists."""
    events = harness.wait_for(lambda: (lambda found: found if len(found) > count else None)(
        harness.events(job_id, "refused")), timeout=30, what="a refused edit")
    return events[count].message


DECLARED_GPU_MEMORY = "gpu_memory_gb = 1.5"  # a resume-class field that changes nothing of a CPU job's run


def test_edits_on_disk_apply_live_restart_refuse_and_requeue(harness) -> None:
    harness.start_daemon()
    spec = harness.job_file("edited", total_steps=1_000_000, checkpoint_every=0)
    original = spec.read_text()
    job = harness.submit(spec)
    harness.wait_step(job.id, 300)
    first_pid = harness.job(job.id).pid

    # Identity field: refused with file:line, the worker goes on untouched.
    spec.write_text(original.replace("lr = 1e-3", "lr = 5e-3"))
    message = refused_after(harness, job.id, 0)
    assert f"{spec}:{line_of(original, 'lr =')}: dqn.lr: 0.001 -> 0.005" in message
    assert "start a new run" in message

    # Unparsable: refused with the line of the error.
    broken = original.replace("[env]", "[env")
    spec.write_text(broken)
    message = refused_after(harness, job.id, 1)
    assert f"{spec}:{line_of(broken, '[env')}:" in message and "invalid TOML" in message
    job_now = harness.job(job.id)
    assert (job_now.state, job_now.pid) == (State.RUNNING, first_pid)
    assert "lr = 0.001" in (Path(job.run_dir) / "job.toml").read_text()

    # Resume-class field: pause, then resume with it; the job never rests paused. (Not threads: two torch
    # threads spinning on two loaded cores made the 6,000 steps below take 127 s in one suite run.)
    resumed_with = original.replace("threads = 1", f"threads = 1\n{DECLARED_GPU_MEMORY}")
    spec.write_text(resumed_with)
    harness.wait_for(lambda: harness.job(job.id).pid not in (None, first_pid), timeout=60,
                     what="a restarted worker", report=lambda: harness.report(job.id))
    second = harness.wait_state(job.id, State.RUNNING, timeout=60)
    assert ("running", "pausing") in harness.transitions(job.id)
    assert ("pausing", "queued") in harness.transitions(job.id)
    assert "gpu_memory_gb = 1.5" in (Path(job.run_dir) / "job.toml").read_text()
    assert harness.newest_checkpoint(job.run_dir).reason == "pause"

    # Live field: total_steps reaches the running worker by SIGHUP; it ends there, same pid.
    step = harness.wait_step(job.id, 1).step
    # Room for the edit to reach the worker: under a loaded CI machine it trained 2,206 steps after this read
    # before the SIGHUP landed, so a budget of step + 2,000 was already behind it.
    budget = step + 6_000
    edited = resumed_with.replace("total_steps = 1000000", f"total_steps = {budget}")
    spec.write_text(edited)
    done = harness.wait_state(job.id, State.DONE, timeout=300)
    exit_record = read_exit(Path(job.run_dir))
    assert (exit_record.pid, exit_record.step, done.step) == (second.pid, budget, budget)
    assert any("job.total_steps" in event.message for event in harness.events(job.id, "edit"))
    starts = [transition for transition in harness.transitions(job.id) if transition[1] == "starting"]
    assert len(starts) == 2  # the submit and the resume-class edit; the live edit restarted nothing

    # Raising the budget of a done job runs it again to the new budget.
    spec.write_text(edited.replace(f"total_steps = {budget}", f"total_steps = {budget + 500}"))
    harness.wait_for(lambda: ("done", "queued") in harness.transitions(job.id), timeout=30,
                     what="the done job to be re-queued", report=lambda: harness.report(job.id))
    again = harness.wait_state(job.id, State.DONE, timeout=300)
    assert again.step == budget + 500 and again.total_steps == budget + 500
    assert read_exit(Path(job.run_dir)).pid != second.pid
    assert harness.newest_checkpoint(job.run_dir).step == budget + 500


def test_command_line_values_hold_until_the_file_changes_that_field() -> None:
    from rlsup import spec as specs

    loaded = specs.loads('[job]\nname = "a/../b"\npriority = 1\n', default_name="file")
    overrides = specs.make_overrides(loaded, priority=7)
    effective = specs.apply_overrides(loaded, overrides)
    assert (effective.job.name, effective.job.priority) == ("a-..-b", 7)  # sanitised: no path separators
    longer = loaded.replace("job", total_steps=5)
    assert specs.apply_overrides(longer, overrides).job.priority == 7
    reprioritised = loaded.replace("job", priority=3)
    assert specs.apply_overrides(reprioritised, overrides).job.priority == 3  # the file's edit wins
    renamed = specs.make_overrides(loaded, name="my run")
    assert specs.apply_overrides(loaded, renamed).job.name == "my-run"


def test_a_job_that_never_started_takes_any_edit(harness) -> None:
    harness.settings(cpu_jobs=0)  # hold the queue
    harness.start_daemon()
    spec = harness.job_file("waiting")
    job = harness.submit(spec)
    edited = spec.read_text().replace("lr = 1e-3", "lr = 5e-3").replace("total_steps = 2000", "total_steps = 900")
    spec.write_text(edited)
    harness.wait_for(lambda: harness.events(job.id, "edit"), timeout=30, what="the edit to apply",
                     report=lambda: harness.report(job.id))
    text = (Path(job.run_dir) / "job.toml").read_text()
    assert "lr = 0.005" in text and "total_steps = 900" in text
    waiting = harness.job(job.id)
    assert (waiting.state, waiting.total_steps) == (State.QUEUED, 900)
    assert not harness.events(job.id, "refused")


def test_one_save_of_a_refused_field_and_total_steps_applies_the_budget_and_says_both(harness) -> None:
    """The job used to end at its old budget while its file showed the new one, and the event named lr only."""
    harness.start_daemon()
    spec = harness.job_file("mixed", total_steps=1_000_000, checkpoint_every=0)
    original = spec.read_text()
    job = harness.submit(spec)
    step = harness.wait_step(job.id, 300).step
    pid = harness.job(job.id).pid
    budget = step + 20_000  # room for the SIGHUP to land before the worker passes it (see the test above)
    spec.write_text(original.replace("lr = 1e-3", "lr = 5e-3").replace("total_steps = 1000000",
                                                                       f"total_steps = {budget}"))
    refusal = refused_after(harness, job.id, 0)
    assert f"{spec}:{line_of(original, 'lr =')}: dqn.lr: 0.001 -> 0.005" in refusal
    assert f"job.total_steps: 1000000 -> {budget}" in refusal and "applied" in refusal
    applied = harness.wait_for(lambda: harness.events(job.id, "edit"), timeout=30, what="the applied part")
    assert f"job.total_steps: 1000000 -> {budget}" in applied[0].message and "dqn.lr" in applied[0].message
    run_spec = (Path(job.run_dir) / "job.toml").read_text()
    assert f"total_steps = {budget}" in run_spec and "lr = 0.001" in run_spec
    code, out, _ = harness.cli("status", str(job.id))
    assert code == 0 and "dqn.lr: 0.001 -> 0.005" in out and f"job.total_steps: 1000000 -> {budget}" in out
    # The worker itself runs to the new budget: it says so in status.json, the same worker (live, no restart).
    harness.wait_for(lambda: (read_worker_status(Path(job.run_dir)) or WorkerStatus()).total_steps == budget,
                     timeout=60, what="the worker to take the new budget", report=lambda: harness.report(job.id))
    assert harness.job(job.id).pid == pid


def test_a_mixed_save_while_paused_applies_its_budget_at_the_resume(harness) -> None:
    harness.start_daemon()
    spec = harness.job_file("paused-mixed", total_steps=1_000_000, checkpoint_every=0)
    original = spec.read_text()
    job = harness.submit(spec)
    harness.wait_step(job.id, 100)
    assert harness.cli("pause", str(job.id))[0] == 0
    harness.wait_state(job.id, State.PAUSED, timeout=60)
    spec.write_text(original.replace("lr = 1e-3", "lr = 5e-3").replace("total_steps = 1000000",
                                                                       "total_steps = 900000"))
    assert "dqn.lr" in refused_after(harness, job.id, 0)
    assert harness.job(job.id).total_steps == 900_000 and harness.job(job.id).state is State.PAUSED
    assert harness.cli("resume", str(job.id))[0] == 0
    status = harness.wait_step(job.id, 1, timeout=60)
    assert status.total_steps == 900_000
    assert "lr = 0.001" in (Path(job.run_dir) / "job.toml").read_text()
    harness.cli("kill", str(job.id))


@pytest.mark.parametrize("copy", [True, False], ids=["copy", "followed"])
def test_an_edit_of_a_file_without_a_name_keeps_the_job_name(harness, copy: bool) -> None:
    """Issue 50 item 1: a file with no [job] name, submitted by copy (as every example is), was renamed "source"
    by its first edit: the name came from the followed file's name, RUN/source.toml, and `rlsup status NAME`
    then found no job. The name stays the one submitted, and the live edit applies."""
    harness.start_daemon()
    spec = harness.job_file("cartpole-dqn", total_steps=1_000_000, checkpoint_every=0)
    job = harness.submit(spec, copy=copy)
    assert job.name == "cartpole-dqn"
    step = harness.wait_step(job.id, 100).step
    followed = Path(harness.job(job.id).spec_path)
    assert (followed.name == "source.toml") is copy
    budget = 2_000_000 + step
    followed.write_text(followed.read_text().replace("total_steps = 1000000", f"total_steps = {budget}"))
    applied = harness.wait_for(lambda: harness.events(job.id, "edit"), timeout=30, what="the edit to apply",
                               report=lambda: harness.report(job.id))
    assert f"job.total_steps: 1000000 -> {budget}" in applied[0].message and "job.name" not in applied[0].message
    assert harness.job(job.id).name == "cartpole-dqn"
    assert 'name = "cartpole-dqn"' in (Path(job.run_dir) / "job.toml").read_text()
    harness.wait_for(lambda: (read_worker_status(Path(job.run_dir)) or WorkerStatus()).total_steps == budget,
                     timeout=60, what="the worker to take the new budget", report=lambda: harness.report(job.id))
    code, out, err = harness.cli("status", "cartpole-dqn")
    assert code == 0 and "cartpole-dqn" in out and "source" not in out.replace("source.toml", ""), (out, err)
    harness.cli("kill", str(job.id))
