"""SAC on Pendulum-v1 as a user runs it: a SIGINT pause resumes bit for bit (standard replay, and elite mixed in),
the checkpoint plays in `rlsup enjoy`, and job files it cannot train are refused in one sentence."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, final_fingerprint, pause_then_resume, run_rlsup

STEPS = 1_500
STANDARD = """
[[replay]]
capacity = 5_000
"""
ELITE_MIX = """
[[replay]]
capacity = 5_000
ratio = 0.5

[[replay]]
kind = "elite"
capacity = 5_000
ratio = 0.5
"""


def sac_text(replays: str = STANDARD, *, seed: int = 3, distance: str = "", env: str = "Pendulum-v1") -> str:
    return f"""
[job]
algo = "sac"
seed = {seed}
total_steps = {STEPS}
threads = 1

[env]
id = "{env}"

[sac]
batch_size = 32
learning_starts = 300
policy_every = 2
hidden_sizes = [32, 32]

[checkpoint]
every_steps = 500

[log]
every_steps = 100
{replays}{distance}"""


def job(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("env, replays", [("Pendulum-v1", STANDARD), ("Pendulum-v1", ELITE_MIX),
                                          ("Hopper-v5", STANDARD)], ids=["pendulum", "pendulum-elite-mix", "hopper"])
def test_a_paused_sac_run_resumes_bit_for_bit(tmp_path: Path, env: str, replays: str) -> None:
    """Paused mid-episode (Pendulum's episodes are 200 steps; the pause lands past step 700; Hopper's physics
    state is MuJoCo's whole state, captured and restored without replaying actions), the resumed run's policy,
    critics, targets and temperature equal the straight run's."""
    text = sac_text(replays, env=env)
    straight = tmp_path / "straight"
    result = run_rlsup("run", job(tmp_path, "straight", text), "--run-dir", straight)
    assert result.returncode == 0, result.stderr
    paused = tmp_path / "paused"
    pause_then_resume(job(tmp_path, "paused", text), paused, train_step=700, total_steps=STEPS)
    assert final_fingerprint(paused) == final_fingerprint(straight)
    played = run_rlsup("enjoy", paused, "--episodes", 2, "--json")
    assert played.returncode == 0, played.stderr
    assert len(json.loads(played.stdout)["returns"]) == 2


def test_elite_replay_by_policy_divergence_is_refused_for_continuous_actions(tmp_path: Path) -> None:
    text = sac_text(ELITE_MIX, distance='distance = "kl_div"\n')
    result = run_rlsup("validate", job(tmp_path, "kl", text))
    assert_one_line_error(result, 2, "kl_div compares the policies of discrete actions")
