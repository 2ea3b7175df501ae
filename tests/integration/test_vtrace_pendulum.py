"""V-trace on Pendulum-v1 and Hopper-v5 in real runs: bit-exact serial resume, kl_div refused, the mean action
exported."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlsup.run.exit import read_exit
from rlsup_testing import assert_one_line_error, final_fingerprint, pause_then_resume, run_rlsup, vtrace_text

STEPS_PER_UPDATE = 10 * 8  # unroll_length × batch_size below
ELITE_REPLAY = {"kind": "elite", "capacity": 32, "ratio": 0.5, "min_size": 16, "lambda_batch_multiplier": 3.0,
                "anneal_steps": 3_200}


def pendulum_job(directory: Path, *, total_steps: int, name: str = "pendulum", replays: tuple[dict, ...] = (
        {"kind": "queue", "capacity": 4, "ratio": 0.5}, ELITE_REPLAY), env_id: str = "Pendulum-v1", **vtrace) -> Path:
    """A small serial Pendulum job: tanh squashing, normalised rewards and observations, so that all are resumed too."""
    settings = dict(actors=2, envs_per_actor=2, unroll_length=10, batch_size=8, lr=1e-3, lr_end_step=1_000_000,
                    hidden_sizes=[32, 32], feature_size=16, gamma=0.9, squash="tanh", normalize_rewards=True,
                    normalize_observations=True, log_std_init=-0.5, replays=replays)
    text = vtrace_text(total_steps=total_steps, serial=True, **{**settings, **vtrace})
    path = directory / f"{name}.toml"
    path.write_text(text.replace('id = "CartPole-v1"', f'id = "{env_id}"'))
    return path


def test_a_serial_pendulum_run_paused_mid_episode_resumes_bit_exact(tmp_path: Path) -> None:
    # 1,000 steps of 2×2 envs per actor round: the pause falls inside Pendulum's 200-step episodes.
    total = 150 * STEPS_PER_UPDATE
    job = pendulum_job(tmp_path, total_steps=total)
    straight = tmp_path / "straight"
    result = run_rlsup("run", job, "--run-dir", straight)
    assert result.returncode == 0, result.stderr

    run_dir = tmp_path / "paused"
    pause_then_resume(job, run_dir, train_step=total // 3, total_steps=total)
    assert read_exit(run_dir).step == total
    assert final_fingerprint(run_dir) == final_fingerprint(straight)


def test_a_serial_hopper_run_paused_mid_episode_resumes_bit_exact(tmp_path: Path) -> None:
    """Hopper-v5's physics is restored from MuJoCo's whole state, not replayed: the resumed run is the straight one."""
    total = 100 * STEPS_PER_UPDATE
    job = pendulum_job(tmp_path, total_steps=total, name="hopper", env_id="Hopper-v5")
    straight = tmp_path / "straight"
    result = run_rlsup("run", job, "--run-dir", straight)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "paused"
    pause_then_resume(job, run_dir, train_step=total // 3, total_steps=total)
    assert final_fingerprint(run_dir) == final_fingerprint(straight)


def test_kl_div_is_refused_for_continuous_actions_in_one_sentence(tmp_path: Path) -> None:
    job = pendulum_job(tmp_path, total_steps=800, replays=({**ELITE_REPLAY, "ratio": 1.0, "distance": "kl_div"},))
    # Refused as the job is checked, at the file and line of the field, before any worker starts.
    for command in (("validate", job), ("run", job, "--run-dir", tmp_path / "run")):
        assert_one_line_error(run_rlsup(*command), 2, f"{job}:", "distance: kl_div compares the policies of discrete "
                              "actions, and a continuous policy has no logits: use ln_norm or cos_dist")
    assert not (tmp_path / "run").exists()


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")
def test_the_export_plays_the_mean_action_within_the_bounds_it_describes(tmp_path: Path) -> None:
    job = pendulum_job(tmp_path, total_steps=4 * STEPS_PER_UPDATE, replays=({"kind": "queue", "capacity": 8},))
    run_dir = tmp_path / "run"
    result = run_rlsup("run", job, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "policy.torchscript"
    result = run_rlsup("export", run_dir, "--format", "torchscript", "--out", out)
    assert result.returncode == 0, result.stderr
    description = json.loads(out.with_name(out.name + ".json").read_text())
    assert description["actions"] == {"count": 1, "kind": "continuous", "low": [-2.0], "high": [2.0]}
    assert description["output"]["shape"] == [None, 1] and description["output"]["dtype"] == "float32"
    observations = np.random.default_rng(0).normal(0, 5, size=(64, 3)).astype(np.float32)
    actions = torch.jit.load(str(out))(torch.as_tensor(observations)).numpy()
    assert actions.shape == (64, 1) and actions.dtype == np.float32
    assert (np.abs(actions) <= 2.0).all() and len(np.unique(actions)) > 1
