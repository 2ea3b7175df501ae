"""[log] tensorboard: the event files TensorBoard reads hold exactly metrics.jsonl's steps and values,
across a pause and resume and a restart from a checkpoint older than the events written."""
from __future__ import annotations

import os
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy
import pytest

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.run.status import read_worker_status
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.run.exit import EXIT_PAUSED
from rlsup.worker.tensorboard import NOT_INSTALLED
from rlsup_testing import cartpole_job, path_hiding, pause_when, rlsup_command, run_rlsup, start_rlsup


def tensorboard_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """What TensorBoard's own reader makes of the run's event files: tag -> (step, value), every one kept."""
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    reader = event_accumulator.EventAccumulator(str(run_dir / paths.TENSORBOARD),
                                                size_guidance={event_accumulator.SCALARS: 0})
    reader.Reload()
    return {tag: [(event.step, event.value) for event in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}


def metrics_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl's numbers by kind/key, as float32 (TensorBoard's simple_value)."""
    expected: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for record in runfiles.read_metrics(run_dir):
        for key, value in record.items():
            if key not in ("t", "kind", "step") and type(value) in (int, float):
                expected[f"{record['kind']}/{key}"].append((record["step"], float(numpy.float32(value))))
    return dict(expected)


def paused_run(process, run_dir: Path, train_step: int) -> None:
    pause_when(process, run_dir, train_step=train_step)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_PAUSED, stderr


def test_event_files_match_metrics_across_pause_resume_and_an_older_checkpoint(tmp_path: Path) -> None:
    job = cartpole_job(tmp_path, total_steps=6_000, checkpoint_every=1_000, log_every=250, eval_every=1_000)
    job.write_text(job.read_text().replace("[log]\n", "[log]\ntensorboard = true\n"))
    run_dir = tmp_path / "run"

    paused_run(start_rlsup("run", job, "--run-dir", run_dir), run_dir, train_step=2_600)
    assert tensorboard_scalars(run_dir) == metrics_scalars(run_dir)
    paused_run(start_rlsup("run", "--resume", run_dir), run_dir, train_step=4_100)
    written = tensorboard_scalars(run_dir)
    assert max(step for step, _ in written["train/loss"]) > 4_000

    # The pause checkpoint fails its checksums: the next start takes step 4000's, older than the events
    # written, as a crash restart would; metrics.jsonl is cut back to it, and so must the events be.
    newest = list_checkpoints(run_dir)[-1]
    assert newest.reason == "pause" and newest.step > 4_000
    victim = newest.path / "tensors.pt"
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert "step-000000004000" in result.stderr  # resumed from the older one

    expected = metrics_scalars(run_dir)
    assert {"train/loss", "train/steps_per_second", "eval/mean"} <= expected.keys()
    assert tensorboard_scalars(run_dir) == expected
    train_steps = [step for step, _ in expected["train/steps_per_second"]]
    assert train_steps == list(range(250, 6_001, 250))  # metrics.jsonl itself has every step once
    assert len(list((run_dir / paths.TENSORBOARD).glob("events.out.tfevents.*"))) == 1


def test_without_tensorboard_the_run_trains_on_and_says_so(tmp_path: Path) -> None:
    # A package named tensorboard that cannot be imported, ahead of the installed one: as if it were absent.
    job = cartpole_job(tmp_path, total_steps=600, checkpoint_every=0)
    job.write_text(job.read_text().replace("[log]\n", "[log]\ntensorboard = true\n"))
    run_dir = tmp_path / "run"
    environment = {**os.environ, "PYTHONPATH": path_hiding(tmp_path / "hidden", "tensorboard")}
    result = subprocess.run(rlsup_command("run", job, "--run-dir", run_dir), capture_output=True, text=True,
                            env=environment, timeout=240)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert read_worker_status(run_dir).switched_off == (NOT_INSTALLED,)
    assert not list(run_dir.glob(f"{paths.TENSORBOARD}/events.out.tfevents.*"))
