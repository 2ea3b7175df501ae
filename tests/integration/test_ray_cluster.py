"""Jobs on a real Ray head on loopback: pause, edit, resume bit-exactly, live edits, crash restarts, kill, adoption."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.run.exit import EXIT_ABORTED, EXIT_PAUSED, read_exit
from rlsup.jobs.state import State
from rlsup_testing import final_fingerprint, run_rlsup

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ray_head import free_ports, lab_daemon, started_head  # noqa: E402  (tests/, beside rlsup_testing)

@pytest.fixture
def lab(harness, ray_head, tmp_path: Path) -> Path:
    return lab_daemon(harness, ray_head.address, tmp_path / "cluster-runs")


def running_after_restarts(job, restarts: int, old_pid: int | None = None):
    """The job once a worker started after that many restarts runs (a new pid when old_pid is given)."""
    fresh = old_pid is None or job.pid not in (None, 0, old_pid)
    return job if job.state is State.RUNNING and job.restarts == restarts and fresh else None


def straight_fingerprint(harness, name: str, total_steps: int, **fields) -> str:
    """The final checkpoint of an uninterrupted local `rlsup run` of the same job."""
    run_dir = harness.jobs_directory / f"straight-{name}"
    result = run_rlsup("run", harness.job_file(f"straight-{name}", total_steps=total_steps, **fields),
                       "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return final_fingerprint(run_dir)


def test_pause_edit_resume_on_the_cluster_matches_a_straight_run(harness, lab: Path) -> None:
    paused_file = harness.job_file("paused", total_steps=400_000, checkpoint_every=0)
    other_file = harness.job_file("other", total_steps=1_500, gpus=1)
    other_file.write_text(other_file.read_text().replace("[job]\n", '[job]\ncluster = "lab"\n', 1))
    code, out, err = harness.cli("submit", paused_file, "--cluster", "lab")
    assert code == 0, err
    paused = harness.job(int(out))
    other = harness.submit(other_file)
    assert Path(paused.run_dir).parent == lab and Path(other.run_dir).parent == lab
    assert (paused.cluster, other.cluster) == ("lab", "lab")

    harness.wait_step(paused.id, 600, timeout=240)
    running = harness.job(paused.id)
    assert running.process.ref.startswith(f"rlsup-{paused.id}-") and running.where.startswith("lab:")
    code, out, _ = harness.cli("list", "--json")
    assert {row["id"]: row["where"] for row in json.loads(out)}[paused.id].startswith("lab:")
    assert harness.cli("pause", str(paused.id))[0] == 0
    resting = harness.wait_state(paused.id, State.PAUSED, timeout=120)
    run_dir = Path(resting.run_dir)
    checkpoint = harness.newest_checkpoint(run_dir)
    assert checkpoint.reason == "pause" and resting.step == checkpoint.step
    assert read_exit(run_dir).code == EXIT_PAUSED  # Ray reports STOPPED and no code: exit.json has it

    budget = checkpoint.step + 1_500
    paused_file.write_text(paused_file.read_text().replace("total_steps = 400000", f"total_steps = {budget}"))
    harness.wait_for(lambda: harness.job(paused.id).total_steps == budget, timeout=30, what="the edit")
    assert harness.cli("resume", str(paused.id))[0] == 0
    done = harness.wait_state(paused.id, State.DONE, timeout=240)
    assert done.step == budget and done.restarts == 0, harness.report(paused.id)
    assert harness.wait_state(other.id, State.DONE, timeout=240).step == 1_500
    assert final_fingerprint(run_dir) == straight_fingerprint(harness, "paused", budget, checkpoint_every=0)


def test_a_cluster_worker_takes_live_edits_and_restarts_from_its_checkpoint_after_sigkill(harness, lab: Path) -> None:
    spec = harness.job_file("crashing", total_steps=400_000, checkpoint_every=500)
    job = harness.submit(spec, cluster="lab")
    harness.wait_for(lambda: harness.newest_checkpoint(harness.job(job.id).run_dir), timeout=240,
                     what="a first checkpoint")
    first = harness.wait_step(job.id, 600)
    os.kill(first.pid, signal.SIGKILL)  # the worker itself: Ray's job fails with no exit.json
    restarted = harness.wait_for(lambda: running_after_restarts(harness.job(job.id), 1, first.pid), timeout=240,
                                 what="a restarted worker")
    assert "restart 1 of 3" in " ".join(event.message for event in harness.events(job.id, "state"))
    resumed_from = [line for line in runfiles.tail_lines(Path(restarted.run_dir) / paths.LOG_FILE, 200)
                    if "resumed from step-" in line]
    assert resumed_from, "the restarted worker did not resume from a checkpoint"

    # A live edit: no signal reaches a Ray worker, job.toml rewritten in its run directory does.
    budget = harness.wait_step(job.id, 0).step + 8_000  # room for the debounce and the next status tick
    spec.write_text(spec.read_text().replace("total_steps = 400000", f"total_steps = {budget}"))
    done = harness.wait_state(job.id, State.DONE, timeout=240)
    assert (done.step, done.restarts) == (budget, 1)
    assert "reload: job.total_steps" in (Path(done.run_dir) / paths.LOG_FILE).read_text()
    assert final_fingerprint(done.run_dir) == straight_fingerprint(harness, "crashing", budget, checkpoint_every=500)


def test_a_restarted_daemon_adopts_a_cluster_job_and_kill_writes_no_checkpoint(harness, lab: Path) -> None:
    job = harness.submit(harness.job_file("killed", total_steps=400_000, checkpoint_every=0), cluster="lab")
    harness.wait_step(job.id, 300, timeout=240)
    ref = harness.job(job.id).process.ref
    harness.kill_daemon()
    harness.start_daemon()
    harness.wait_for(lambda: any(ref and "adopted" in event.kind for event in harness.events(job.id)), timeout=60,
                     what="the adoption")
    assert harness.job(job.id).process.ref == ref
    harness.wait_step(job.id, 600)

    assert harness.cli("kill", str(job.id))[0] == 0
    killed = harness.wait_state(job.id, State.KILLED, timeout=120)
    assert list_checkpoints(Path(killed.run_dir)) == []  # a pause would have written one
    record = harness.wait_for(lambda: read_exit(Path(killed.run_dir)), timeout=30, what="exit.json")
    assert record.code == EXIT_ABORTED and "kill request" in record.reason


def test_a_job_the_restarted_head_no_longer_knows_is_lost_and_restarted_from_its_checkpoint(harness,
                                                                                           tmp_path: Path) -> None:
    head = started_head()
    try:
        lab_daemon(harness, head.address, tmp_path / "cluster-runs")
        job = harness.submit(harness.job_file("forgotten", total_steps=400_000, checkpoint_every=500), cluster="lab")
        harness.wait_for(lambda: harness.newest_checkpoint(harness.job(job.id).run_dir), timeout=240,
                         what="a first checkpoint")
        first_ref = harness.job(job.id).process.ref
        head.stop()  # the worker goes with it, and the new head at the same address knows no job
        head = started_head(head.ports)
        back = harness.wait_for(lambda: running_after_restarts(harness.job(job.id), 1), timeout=240,
                                what="the restart")
        assert back.process.ref != first_ref
        reasons = " ".join(event.message for event in harness.events(job.id, "state"))
        assert f"lost: the Ray head of cluster lab no longer knows job {first_ref}" in reasons, reasons
        assert "restart 1 of 3" in reasons
        assert any("resumed from step-" in line
                   for line in runfiles.tail_lines(Path(back.run_dir) / paths.LOG_FILE, 200))
        assert harness.cli("kill", str(job.id))[0] == 0
        harness.wait_state(job.id, State.KILLED, timeout=120)
    finally:
        head.stop()


def test_a_head_that_does_not_answer_keeps_the_job_queued_with_the_reason(harness, tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed: pip install 'rlsup[ray]' to run the cluster tests")
    (port,) = free_ports(1)  # nothing listens there
    lab_daemon(harness, f"http://127.0.0.1:{port}", tmp_path / "cluster-runs")
    job = harness.submit(harness.job_file("waiting"), cluster="lab")
    waiting = harness.wait_for(lambda: (lambda now: now if "trying again" in now.reason else None)(harness.job(job.id)),
                               timeout=60, what="the job back in the queue")
    assert waiting.state is State.QUEUED and f"no Ray head answers at http://127.0.0.1:{port}" in waiting.reason
    assert harness.transitions(job.id) == [(None, "queued"), ("queued", "starting"), ("starting", "queued")]


def test_a_local_job_paused_and_edited_to_the_cluster_moves_there_and_resumes_bit_exactly(harness, lab: Path) -> None:
    # --copy: the job follows source.toml inside its run, which the move must carry along.
    job = harness.submit(harness.job_file("mover", total_steps=400_000, checkpoint_every=0), copy=True)
    local_run = Path(job.run_dir)
    assert not local_run.is_relative_to(lab) and Path(job.spec_path) == local_run / paths.SOURCE_COPY
    harness.wait_step(job.id, 600, timeout=240)
    assert harness.cli("pause", str(job.id))[0] == 0
    checkpoint = harness.newest_checkpoint(harness.wait_state(job.id, State.PAUSED, timeout=120).run_dir)

    budget = checkpoint.step + 1_500
    copy = Path(job.spec_path)
    copy.write_text(copy.read_text().replace("total_steps = 400000", f"total_steps = {budget}")
                    .replace("[job]\n", '[job]\ncluster = "lab"\n', 1))
    harness.wait_for(lambda: harness.job(job.id).cluster == "lab", timeout=30, what="the edit to the cluster")
    assert harness.cli("resume", str(job.id))[0] == 0
    done = harness.wait_state(job.id, State.DONE, timeout=240)
    moved = Path(done.run_dir)
    assert moved == lab / local_run.name and Path(done.spec_path) == moved / paths.SOURCE_COPY, harness.report(job.id)
    assert done.step == budget and done.restarts == 0
    assert "placed on cluster lab" in [event.message for event in harness.events(job.id, "state")]
    (event,) = [event.message for event in harness.events(job.id, "moved")]
    assert event.startswith(f"moved run from {local_run} to {moved} for cluster lab"), event
    assert any(f"resumed from {checkpoint.path.name}" in line
               for line in runfiles.tail_lines(moved / paths.LOG_FILE, 200)), harness.report(job.id)
    harness.wait_for(lambda: not local_run.exists() and not (moved / "moved-from.json").exists(), timeout=30,
                     what="the old run deleted")
    assert not any(path.name.startswith(".mov") for path in [*lab.iterdir(), *local_run.parent.iterdir()])
    assert final_fingerprint(moved) == straight_fingerprint(harness, "mover", budget, checkpoint_every=0)
