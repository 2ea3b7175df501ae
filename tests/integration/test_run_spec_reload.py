"""A local worker applies a rewritten job.toml's live fields with no SIGHUP: the path cluster workers depend on."""
from __future__ import annotations

from pathlib import Path

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.run.exit import read_exit
from rlsup.run.status import read_worker_status
from rlsup_testing import cartpole_job, start_rlsup, wait_for


def test_a_rewritten_run_spec_reaches_a_running_worker_without_a_signal(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = start_rlsup("run", cartpole_job(tmp_path, total_steps=400_000, checkpoint_every=0), "--run-dir", run_dir)
    try:
        status = wait_for(lambda: (lambda found: found if found and (found.step or 0) >= 500 else None)(
            read_worker_status(run_dir)), what="the worker training")
        budget = status.step + 6_000
        spec = runfiles.read_run_spec(run_dir)
        runfiles.write_run_spec(run_dir, spec.replace("job", total_steps=budget))  # as the daemon's accepted edit
        _, stderr = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert read_exit(run_dir).step == budget
    log = (run_dir / paths.LOG_FILE).read_text()
    assert f"reload: job.total_steps: 400000 -> {budget} (applied)" in log, log[-2000:]
