"""A run whose loss turns NaN stops in one sentence before any checkpoint holds its weights."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
from rlsup_testing import cartpole_text, run_rlsup, vtrace_text

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.checkpoint.store import load_checkpoint
from rlsup.run.exit import EXIT_SPEC, read_exit

# Adam's or RMSProp's first steps at this rate, unclipped, throw the weights past float32: NaN follows.
EXPLODING_LR = "1e30"


def non_finite(tree, path: str = "") -> list[str]:
    """Where a checkpoint's state tree holds NaN or infinity (tensors, arrays and floats alike)."""
    if isinstance(tree, dict):
        return [found for key, value in tree.items() for found in non_finite(value, f"{path}/{key}")]
    if isinstance(tree, (list, tuple)):
        return [found for index, value in enumerate(tree) for found in non_finite(value, f"{path}/{index}")]
    if isinstance(tree, torch.Tensor) and tree.is_floating_point():
        return [] if bool(torch.isfinite(tree).all()) else [path]
    if isinstance(tree, np.ndarray) and np.issubdtype(tree.dtype, np.floating):
        return [] if bool(np.isfinite(tree).all()) else [path]
    if isinstance(tree, float):
        return [] if math.isfinite(tree) else [path]
    return []


def assert_stopped_before_saving_diverged_weights(result, run_dir: Path) -> list[int]:
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == EXIT_SPEC, (result.returncode, result.stderr)
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("rlsup: training diverged: the ") and "rlsup fork RUN NEW.toml" in last, last
    assert read_exit(run_dir).reason == last.removeprefix("rlsup: ")
    entries = list_checkpoints(run_dir)
    for entry in entries:
        assert non_finite(load_checkpoint(entry.path)[1]) == [], entry.path
    return [entry.step for entry in entries]


def test_a_diverging_dqn_run_keeps_its_checkpoints_from_before(tmp_path):
    # Checkpoints every 100 steps; training starts at 200, and its first updates diverge.
    text = cartpole_text(total_steps=3_000, lr=EXPLODING_LR, checkpoint_every=100, log_every=1_000)
    job = tmp_path / "diverging.toml"
    job.write_text(text.replace("[dqn]\n", "[dqn]\nmax_grad_norm = 0\n"))
    run_dir = tmp_path / "run"
    steps = assert_stopped_before_saving_diverged_weights(run_rlsup("run", job, "--run-dir", run_dir), run_dir)
    assert steps and steps[0] == 100 and steps[-1] <= 300, steps  # the ones before: none written after it


def test_a_diverging_vtrace_run_writes_no_checkpoint(tmp_path):
    job = tmp_path / "diverging.toml"
    job.write_text(vtrace_text(total_steps=3_000, serial=True, lr=float(EXPLODING_LR), max_grad_norm=0,
                               unroll_length=10, batch_size=4, log_every=200))
    run_dir = tmp_path / "run"
    steps = assert_stopped_before_saving_diverged_weights(run_rlsup("run", job, "--run-dir", run_dir), run_dir)
    assert steps == []  # its only checkpoint would have been the final one
