"""The daemon under attack (issue 9): half-recorded spawns, oversized integers, unusable checkpoints, a full disk."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.run.status import WorkerStatus, read_worker_status
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs.state import State
from rlsup.jobs.store import Process
from rlsup_testing import small_filesystem


def corrupt_every_checkpoint(run_dir: Path) -> None:
    for entry in list_checkpoints(run_dir):
        state = entry.path / "state.json"
        state.write_text(state.read_text().replace('"', "'", 1))


def test_a_daemon_dying_between_starting_and_recording_the_pid_adopts_the_worker(harness) -> None:
    # Long enough to be still running when the new daemon looks, on however fast a CPU.
    job = harness.submit(harness.job_file("orphan", total_steps=20_000, checkpoint_every=0))
    # What a daemon leaves when it dies right after spawning: the job `starting`, no pid, a live worker.
    harness.store.transition(job.id, State.STARTING, "placed", process=Process())
    orphan = subprocess.Popen([sys.executable, "-m", "rlsup.worker", job.run_dir], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        harness.wait_for(lambda: (read_worker_status(Path(job.run_dir)) or WorkerStatus()).pid == orphan.pid,
                         what="the orphan worker to report")
        harness.start_daemon()
        adopted = harness.wait_for(lambda: harness.job(job.id).pid, what="a pid for the job",
                                   report=lambda: harness.report(job.id))
        assert adopted == orphan.pid, "a second worker was spawned beside the first"
        done = harness.wait_state(job.id, State.DONE, timeout=120)
        assert done.step == 20_000
        assert any("adopted" in event.message for event in harness.events(job.id, "adopted"))
        train = [record["step"] for record in runfiles.read_metrics(Path(job.run_dir)) if record["kind"] == "train"]
        assert train == sorted(set(train)), "two writers on one metrics.jsonl"
    finally:
        orphan.kill()
        orphan.wait(timeout=30)


def test_oversized_integers_never_kill_the_daemon(harness) -> None:
    harness.start_daemon()
    running = harness.submit(harness.job_file("running", total_steps=1_000_000, checkpoint_every=0))
    harness.wait_step(running.id, 100)
    spec = Path(running.spec_path)
    spec.write_text(spec.read_text().replace("total_steps = 1000000", "total_steps = 99999999999999999999"))
    refused = harness.wait_for(lambda: harness.events(running.id, "refused"), what="the edit refused",
                               report=lambda: harness.report(running.id))
    assert "total_steps: must fit in 64 bits" in refused[0].message
    assert harness.cli("daemon", "status")[0] == 0
    assert harness.job(running.id).state is State.RUNNING

    code, _, err = harness.cli("submit", spec)
    assert code == 2 and "64 bits" in err and "Traceback" not in err
    assert len(list((harness.home / "runs").iterdir())) == 1, "a refused submit leaves no run directory"


def test_a_job_whose_stored_spec_is_broken_fails_and_the_others_go_on(harness) -> None:
    broken = harness.submit(harness.job_file("broken", total_steps=1_000))
    healthy = harness.submit(harness.job_file("healthy", total_steps=1_000))
    run_spec = Path(broken.run_dir) / paths.JOB_FILE
    run_spec.write_text(run_spec.read_text().replace("total_steps = 1000", "total_steps = 99999999999999999999"))
    harness.start_daemon()
    failed = harness.wait_state(broken.id, State.FAILED, timeout=60)
    assert "job.toml" in failed.reason and "64 bits" in failed.reason and failed.restarts == 0
    harness.wait_state(healthy.id, State.DONE, timeout=120)
    assert harness.cli("daemon", "status")[0] == 0


def test_unusable_checkpoints_fail_the_job_with_the_reason_and_fallbacks_are_events(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    lost = harness.submit(harness.job_file("lost", total_steps=1_000_000, checkpoint_every=300))
    fallback = harness.submit(harness.job_file("fallback", total_steps=1_000_000, checkpoint_every=300))
    for job in (lost, fallback):
        harness.wait_for(lambda job=job: len(list_checkpoints(job.run_dir)) >= 2, what="two checkpoints",
                         report=lambda: harness.report(job.id))
        harness.cli("pause", job.id)
    for job in (lost, fallback):
        harness.wait_state(job.id, State.PAUSED)
    corrupt_every_checkpoint(Path(lost.run_dir))
    newest = list_checkpoints(Path(fallback.run_dir))[-1]
    (newest.path / "manifest.json").write_text(json.dumps({"format": 1, "step": "nonsense"}))
    metrics_before = (Path(lost.run_dir) / paths.METRICS_FILE).read_bytes()

    harness.cli("resume", lost.id, fallback.id)
    failed = harness.wait_state(lost.id, State.FAILED, timeout=60)
    assert "none can be used" in failed.reason and "never retried" in failed.reason
    assert failed.restarts == 0 and (Path(lost.run_dir) / paths.METRICS_FILE).read_bytes() == metrics_before
    notices = harness.wait_for(lambda: harness.events(fallback.id, "checkpoint"), what="a fallback event",
                               report=lambda: harness.report(fallback.id))
    assert f"skipped 1 newer checkpoint(s) that do not verify: {newest.path.name}" in notices[0].message


def test_a_full_disk_pauses_the_job_with_the_reason(harness) -> None:
    job = harness.submit(harness.job_file("full", total_steps=3_000, checkpoint_every=1_000))
    with small_filesystem(Path(job.run_dir) / paths.CHECKPOINTS, "64k"):
        harness.start_daemon()
        paused = harness.wait_state(job.id, State.PAUSED, State.FAILED, timeout=120)
    assert paused.state is State.PAUSED, harness.report(job.id)
    assert paused.reason.startswith("no space left on device: needed about") and paused.restarts == 0
