"""[job] max_wall_s with a real daemon: the worker pauses itself with a checkpoint, stays paused until the
budget is raised, and the resumed run ends where one never paused does."""
from __future__ import annotations

from pathlib import Path

from rlsup.run import files as runfiles
from rlsup.run.status import read_worker_status
from rlsup.run.exit import EXIT_WALL_TIME, read_exit
from rlsup.jobs.state import Desired, State
from rlsup_testing import cartpole_job, run_rlsup


def with_wall_budget(path: Path, seconds: float) -> Path:
    text = path.read_text()
    if "max_wall_s" in text:
        lines = [line for line in text.splitlines() if not line.startswith("max_wall_s")]
        text = "\n".join(lines) + "\n"
    path.write_text(text.replace("[job]\n", f"[job]\nmax_wall_s = {seconds}\n"))
    return path


def test_a_used_up_wall_time_pauses_until_raised_and_the_resume_is_exact(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    # 4 s of training at the 3,500 steps/s measured here unloaded: the 1 s budget set below (its edit lands by
    # about 1.5 s of training) cuts it well short of its end, on a CPU twice as fast too; the test asserts so.
    total = 15_000
    straight = harness.submit(harness.job_file("straight", total_steps=total, checkpoint_every=0))
    limited_file = with_wall_budget(harness.job_file("limited", total_steps=total, checkpoint_every=0), 3600)
    limited = harness.submit(limited_file)

    # A live edit reaches the running worker (SIGHUP), which then pauses itself at the next step boundary.
    harness.wait_step(limited.id, 300)
    with_wall_budget(limited_file, 1)
    harness.wait_for(lambda: [event for event in harness.events(limited.id, "signal") if "SIGHUP" in event.message],
                     what="the live edit to reach the worker", report=harness.report)
    paused = harness.wait_state(limited.id, State.PAUSED)
    run_dir = Path(paused.run_dir)
    checkpoint = harness.newest_checkpoint(run_dir)
    assert checkpoint.reason == "pause" and 0 < checkpoint.step < total == paused.total_steps
    ended = read_exit(run_dir)
    assert ended.code == EXIT_WALL_TIME and ended.step == checkpoint.step
    assert paused.desired is Desired.PAUSED  # held: nobody asked for it, yet it must not restart
    assert "max_wall_s of 1 s of training is used up" in paused.reason
    assert harness.transitions(limited.id)[-1] == ("running", "paused")

    # Resumed without a larger budget, it pauses again at once, saying so, with no new checkpoint.
    assert harness.cli("resume", str(limited.id))[0] == 0
    again = harness.wait_for(lambda: [event for event in harness.events(limited.id, "state")
                                      if event.to_state == "paused" and "was already used up" in event.message],
                             timeout=120, what="the second pause", report=harness.report)
    assert f"paused at step {checkpoint.step}: the [job] max_wall_s of 1 s" in again[0].message
    harness.wait_state(limited.id, State.PAUSED)
    assert harness.newest_checkpoint(run_dir) == checkpoint

    # The budget raised by a live edit of the job file (no limit now), a resume trains to the end.
    with_wall_budget(limited_file, 0)
    # The daemon writes the run's job.toml before it records the edit's event: wait for both.
    harness.wait_for(lambda: runfiles.read_run_spec(run_dir).job.max_wall_s == 0
                     and len(harness.events(limited.id, "edit")) == 2, what="the edit to be applied",
                     report=harness.report)
    assert harness.cli("resume", str(limited.id))[0] == 0
    finished = harness.wait_state(limited.id, State.DONE, timeout=300)
    reference = harness.wait_state(straight.id, State.DONE, timeout=300)
    assert finished.restarts == 0 and finished.step == total
    assert harness.newest_checkpoint(run_dir).fingerprint == harness.newest_checkpoint(reference.run_dir).fingerprint


def test_a_foreground_run_ends_as_a_pause_and_counts_its_resumes(tmp_path: Path) -> None:
    job = with_wall_budget(cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=0), 1)
    run_dir = tmp_path / "run"
    first = run_rlsup("run", job, "--run-dir", run_dir)
    assert first.returncode == EXIT_WALL_TIME and "Traceback" not in first.stderr, first.stderr
    step = read_exit(run_dir).step
    assert (f"paused at step {step} with a checkpoint: the [job] max_wall_s of 1 s of training is used up"
            in first.stderr)
    assert f"continue with: rlsup run --resume {run_dir} JOB.toml, a JOB.toml that raises [job] max_wall_s" \
        in first.stderr

    # The budget is the run's, not the process's: a plain resume has none left.
    second = run_rlsup("run", "--resume", run_dir)
    assert second.returncode == EXIT_WALL_TIME, second.stderr
    assert f"paused at step {step}: the [job] max_wall_s of 1 s of training was already used up" in second.stderr
    assert read_worker_status(run_dir).phase == "paused"
