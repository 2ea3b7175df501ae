"""DQN with centered RMSProp (the MinAtar paper's optimizer): its state is checkpointed and a SIGINT pause resumes bit for bit."""
from __future__ import annotations

from pathlib import Path

from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import load_checkpoint
from rlsup_testing import cartpole_job, final_fingerprint, pause_then_resume, run_rlsup

STEPS = 1_500


def rmsprop_job(directory: Path, name: str) -> Path:
    path = cartpole_job(directory, total_steps=STEPS, name=name)
    text = path.read_text()
    assert text.count("[dqn]\n") == 1
    path.write_text(text.replace("[dqn]\n", '[dqn]\noptimizer = "rmsprop"\nrmsprop_alpha = 0.95\n'))
    return path


def test_centered_rmsprop_pauses_and_resumes_bit_exact(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    result = run_rlsup("run", rmsprop_job(tmp_path, "straight"), "--run-dir", straight)
    assert result.returncode == 0, result.stderr

    run_dir = tmp_path / "paused"
    pause_then_resume(rmsprop_job(tmp_path, "paused"), run_dir, train_step=700, total_steps=STEPS)
    assert final_fingerprint(run_dir) == final_fingerprint(straight)
    # Centered RMSProp's running mean gradient is saved beside its mean square, with its own settings.
    _, state = load_checkpoint(latest_verified(run_dir).path)
    optimizer = state["trainer"]["learner"]["optimizer"]
    assert set(optimizer["state"][0]) == {"step", "square_avg", "grad_avg"}
    assert {key: optimizer["param_groups"][0][key] for key in ("alpha", "eps", "centered")} == {
        "alpha": 0.95, "eps": 0.01, "centered": True}
