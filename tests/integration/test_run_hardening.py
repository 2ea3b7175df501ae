"""`rlsup run`, `checkpoints` and `enjoy` under attack (issue 9): bad checkpoints, two workers, signals, a full disk."""
from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints, read_manifest
from rlsup.run.exit import EXIT_ABORTED, EXIT_NO_SPACE, EXIT_PAUSED, read_exit
from rlsup_testing import (cartpole_job, checkpoint_reasons, copy_run, finished_cartpole, interrupted_before_python_ran,
                           interrupts_at_their_default, metric_steps, run_rlsup, small_filesystem, start_rlsup,
                           vtrace_text, wait_for)

STEPS = 2_000


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small CartPole run to its budget: checkpoints at 1000, 1500 and 2000."""
    run_dir = finished_cartpole(tmp_path_factory, STEPS)
    assert [step for step, _ in checkpoint_reasons(run_dir)] == [1000, 1500, 2000]
    return run_dir


def corrupt(checkpoint: Path) -> None:
    """Flip a byte in the middle of the checkpoint's biggest file (the manifest stays intact)."""
    victim = max((path for path in checkpoint.rglob("*") if path.is_file() and path.name != "manifest.json"),
                 key=lambda path: path.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))


def raise_budget(run_dir: Path, total: int) -> Path:
    edited = cartpole_job(run_dir.parent, total_steps=total, checkpoint_every=500, name="edited")
    return edited


def assert_no_traceback(text: str) -> None:
    assert "Traceback" not in text, text


def test_a_run_with_no_usable_checkpoint_is_refused_not_restarted(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    entries = list_checkpoints(run_dir)
    corrupt(entries[0].path)
    corrupt(entries[1].path)
    newest = entries[2].path / "manifest.json"
    manifest = read_manifest(entries[2].path)
    newest.write_text(json.dumps({**manifest, "format": 2}))  # as a newer rlsup would write it
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file() and "checkpoints" in path.parts}
    metrics_before = (run_dir / "metrics.jsonl").read_bytes()

    result = run_rlsup("run", "--resume", run_dir, raise_budget(run_dir, 3_000))
    assert result.returncode == 2, result.stderr
    assert_no_traceback(result.stderr)
    assert "none can be used" in result.stderr
    assert "step-000000001000 (checksum mismatch in" in result.stderr
    assert "step-000000002000 (format 2 is newer than this rlsup (1): upgrade rlsup)" in result.stderr
    assert "--from-scratch" in result.stderr
    # Nothing of the run changed: not a checkpoint, not a metrics line.
    assert {path: path.read_bytes() for path in before} == before
    assert (run_dir / "metrics.jsonl").read_bytes() == metrics_before
    assert read_exit(run_dir).code == 2

    # Starting over is explicit, and moves the old checkpoints and metrics aside, deleting nothing.
    result = run_rlsup("run", "--resume", run_dir, "--from-scratch")
    assert result.returncode == 0, result.stderr
    discarded = sorted(run_dir.glob("checkpoints.discarded-*"))
    assert len(discarded) == 1 and sorted(path.name for path in discarded[0].iterdir()) == [
        "step-000000001000", "step-000000001500", "step-000000002000"]
    assert next(run_dir.glob("metrics.discarded-*.jsonl")).read_bytes() == metrics_before
    assert read_exit(run_dir).step == 3_000  # from step 0 to the budget the edit raised
    assert metric_steps(run_dir, "train") == list(range(250, 3_001, 250))


def test_falling_back_says_which_checkpoints_were_skipped_and_why(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    newest = list_checkpoints(run_dir)[-1].path
    corrupt(newest)
    (run_dir / "checkpoints" / "step-000000009000").mkdir()  # a directory whose manifest never came

    result = run_rlsup("run", "--resume", run_dir, raise_budget(run_dir, 2_500))
    assert result.returncode == 0, result.stderr
    for text in (result.stderr, (run_dir / "worker.log").read_text()):
        assert "skipped 2 newer checkpoint(s) that do not verify" in text
        assert "step-000000009000 (manifest.json: missing or unreadable)" in text
        assert "step-000000002000 (checksum mismatch in" in text
        assert "resumed from step-000000001500" in text

    played = run_rlsup("enjoy", run_dir, "--episodes", "1", "--checkpoint", "latest")
    assert played.returncode == 0 and "mean return" in played.stdout


def test_bad_checkpoints_give_one_line_errors_and_a_failing_verify(tmp_path: Path, finished_run: Path) -> None:
    run_dir = copy_run(finished_run, tmp_path)
    corrupt(list_checkpoints(run_dir)[0].path)
    enjoyed = run_rlsup("enjoy", run_dir, "--checkpoint", "1000", "--episodes", "1")
    assert enjoyed.returncode == 2 and enjoyed.stderr.count("\n") == 1, enjoyed.stderr
    assert enjoyed.stderr.startswith("rlsup: checkpoint ") and "checksum mismatch in" in enjoyed.stderr

    (run_dir / "checkpoints" / "step-000000009000").mkdir()
    (run_dir / "checkpoints" / "step-000000009000" / "manifest.json").write_text('{"step": 90')
    listed = run_rlsup("checkpoints", run_dir)
    assert listed.returncode == 1
    assert "step-000000009000: not a usable checkpoint (manifest.json: missing or unreadable)" in listed.stdout
    verified = json.loads(run_rlsup("checkpoints", run_dir, "--verify", "--json").stdout)
    assert [(row["step"], row["verified"]) for row in verified] == [
        (1000, False), (1500, True), (2000, True), (9000, False)]

    shutil.rmtree(run_dir / "checkpoints")
    (run_dir / "checkpoints").write_text("a file where the directory should be")
    for arguments in (("checkpoints", run_dir), ("run", "--resume", run_dir)):
        result = run_rlsup(*arguments)
        assert result.returncode == 2, result.stderr
        assert_no_traceback(result.stderr)
        assert "cannot read" in result.stderr and "checkpoints: Not a directory" in result.stderr


def test_a_second_worker_on_a_run_leaves_it_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = start_rlsup("run", cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=0), "--run-dir", run_dir)
    try:
        wait_for(lambda: metric_steps(run_dir, "train") or first.poll() is not None, what="training")
        assert first.poll() is None
        log_before = (run_dir / "worker.log").read_bytes()
        second = run_rlsup("run", "--resume", run_dir, timeout=60)
        assert second.returncode == 2
        assert f"is already being trained by pid {first.pid}" in second.stderr
        assert (run_dir / "worker.log").read_bytes()[:len(log_before)] == log_before
        assert not (run_dir / "exit.json").exists() and first.poll() is None
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == EXIT_PAUSED
    assert read_exit(run_dir).code == EXIT_PAUSED


@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.15, 0.3, 0.6])
def test_ctrl_c_at_any_moment_of_start_up_prints_no_traceback(tmp_path: Path, delay_s: float) -> None:
    """One Ctrl-C, however early, is never lost: it pauses the run (rlsup holds it until the worker listens)."""
    run_dir = tmp_path / "run"
    with interrupts_at_their_default():
        process = start_rlsup("run", cartpole_job(tmp_path, total_steps=1_000_000), "--run-dir", run_dir, cold=True)
    try:
        time.sleep(delay_s)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)  # a pause under load takes seconds, training takes hours
    finally:
        if process.poll() is None:  # a lost interrupt: fail, but leave no training behind for the other tests
            process.kill()
            process.communicate()
    if interrupted_before_python_ran(process.returncode, stderr):
        return
    assert_no_traceback(stderr)
    assert process.returncode == EXIT_PAUSED, stderr
    assert f"continue with: rlsup run --resume {run_dir}" in stderr
    assert read_exit(run_dir).code == EXIT_PAUSED
    assert [reason for _, reason in checkpoint_reasons(run_dir)] == ["pause"]


def test_a_second_interrupt_while_pausing_leaves_a_matching_exit_record(tmp_path: Path) -> None:
    """SIGINT twice, a moment apart, at several points of a pause; the record always matches the exit."""
    for round_number, gap_s in enumerate((0.0, 0.01, 0.05)):
        run_dir = tmp_path / f"run-{round_number}"
        process = start_rlsup("run", cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=300),
                              "--run-dir", run_dir)
        wait_for(lambda: list_checkpoints(run_dir) or process.poll() is not None, what="a checkpoint")
        process.send_signal(signal.SIGINT)
        time.sleep(gap_s)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert_no_traceback(stderr)
        record = read_exit(run_dir)
        assert record is not None and record.code == process.returncode in (EXIT_PAUSED, EXIT_ABORTED), stderr
        # The last valid checkpoint: the pause one if it was finished, else the one before it.
        assert Path(record.checkpoint).name == list_checkpoints(run_dir)[-1].path.name


def test_a_replay_bigger_than_memory_is_refused_at_start(tmp_path: Path) -> None:
    job = cartpole_job(tmp_path, total_steps=1_000)
    job.write_text(job.read_text().replace("capacity = 5_000", f"capacity = {2 ** 32}"))
    assert run_rlsup("validate", job).returncode == 0  # within the field's range; too big for this machine
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run")
    assert result.returncode == 2, result.stderr
    assert_no_traceback(result.stderr)
    assert "the replays need about" in result.stderr and "GiB" in result.stderr and "available" in result.stderr
    assert list_checkpoints(tmp_path / "run") == []


def test_vtrace_unroll_slots_bigger_than_memory_are_refused_at_start(tmp_path: Path) -> None:
    """The actors' unroll slots (2 a process, each an unroll of every env of the actor) are allocated with the
    trainer: counted with the replays, they are refused before anything is, not by the allocator or the kernel."""
    job = tmp_path / "vtrace.toml"
    job.write_text(vtrace_text(total_steps=1_000, serial=False, actors=2, envs_per_actor=2 ** 20,
                               unroll_length=100_000, batch_size=4))
    assert run_rlsup("validate", job).returncode == 0  # within the fields' ranges; too big for any machine
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run")
    assert result.returncode == 2, result.stderr
    assert_no_traceback(result.stderr)
    assert "the replays and the actors' unroll slots need about" in result.stderr and "available" in result.stderr
    assert list_checkpoints(tmp_path / "run") == []


def test_a_full_disk_is_named_and_the_previous_checkpoint_stays(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    job = cartpole_job(tmp_path, total_steps=3_000, checkpoint_every=1_000)
    with small_filesystem(run_dir / "checkpoints", "64k"):
        result = run_rlsup("run", job, "--run-dir", run_dir)
        assert result.returncode == EXIT_NO_SPACE, result.stderr
        assert_no_traceback(result.stderr)
        assert "no space left on device: needed about" in result.stderr and "iB in" in result.stderr
        record = read_exit(run_dir)
        assert record.code == EXIT_NO_SPACE and record.reason.startswith("no space left on device")
        assert list_checkpoints(run_dir) == [] and os.listdir(run_dir / "checkpoints") == []
