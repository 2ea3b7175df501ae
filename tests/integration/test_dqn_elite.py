"""DQN with a standard and an elite replay under `rlsup run`: paused by SIGINT, it resumes bit for bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import load_checkpoint
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup_testing import cartpole_job, checkpoint_reasons, final_fingerprint, pause_when, run_rlsup, start_rlsup

STEPS = 2_000
# Half of each batch of 32 from each replay; λ anneals until step 1,400 (anneal_steps × alfa),
# so the pause at about step 800 falls while the elite bookkeeping is still changing.
TWO_REPLAYS = """
[[replay]]
kind = "standard"
capacity = 5_000
ratio = 0.5

[[replay]]
kind = "elite"
capacity = 5_000
ratio = 0.5
strategy = 4
lambda_batch_multiplier = 4.0
alfa_annealing_factor = 2.0
anneal_steps = 700
"""


def elite_job(directory: Path, name: str) -> Path:
    path = cartpole_job(directory, total_steps=STEPS, name=name)
    text = path.read_text()
    assert "[[replay]]\ncapacity = 5_000\n" in text
    path.write_text(text.replace("[[replay]]\ncapacity = 5_000\n", TWO_REPLAYS))
    return path


def test_elite_dqn_pauses_and_resumes_bit_exact(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    result = run_rlsup("run", elite_job(tmp_path, "straight"), "--run-dir", straight)
    assert result.returncode == 0, result.stderr

    run_dir = tmp_path / "paused"
    process = start_rlsup("run", elite_job(tmp_path, "paused"), "--run-dir", run_dir)
    pause_when(process, run_dir, train_step=800)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    paused_step = read_exit(run_dir).step
    assert 800 <= paused_step < STEPS and checkpoint_reasons(run_dir)[-1] == (paused_step, "pause")
    assert_elite_state_saved(run_dir)

    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(run_dir) == final_fingerprint(straight)


def assert_elite_state_saved(run_dir: Path) -> None:
    """The pause checkpoint holds the elite replay's features, draw counts and sampler progress."""
    entry = latest_verified(run_dir)
    _, state = load_checkpoint(entry.path)
    standard, elite = state["trainer"]["replay"]["0"], state["trainer"]["replay"]["1"]
    assert "row_features" not in standard["storage"]
    features, counts = elite["storage"]["row_features"], elite["storage"]["row_times_sampled"]
    assert features.shape[1:] == (1, 32) and np.abs(features).sum() > 0  # one env, 32 penultimate units
    assert counts.min() >= 1 and counts.max() > 1
    assert elite["sampler"]["calls"] > 0 and 1.0 < elite["sampler"]["lambda"] < 4.0
