"""Vectorised envs in real `rlsup run` processes: a SIGINT mid-episode, then a resume, ends bit-exact."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup_testing import breakout_job, cartpole_job, final_fingerprint, pause_when, run_rlsup, start_rlsup


def with_num_envs(job: Path, num_envs: int) -> Path:
    """The job file with `num_envs` set in its [env] table."""
    text = job.read_text()
    assert "\n[env]\n" in text
    job.write_text(text.replace("\n[env]\n", f"\n[env]\nnum_envs = {num_envs}\n", 1))
    return job


def envs_mid_episode(run_dir: Path) -> int:
    """How many envs of the newest checkpoint were inside an episode when it was written."""
    state = json.loads((list_checkpoints(run_dir)[-1].path / "state.json").read_text())
    episodes = [env["episode"] for env in state["trainer"]["envs"].values()]
    return sum(1 for episode in episodes if not episode["needs_reset"] and episode["length"] > 0)


def paused_then_resumed(job: Path, run_dir: Path, *, train_step: int) -> str:
    """Run job into run_dir, SIGINT it past train_step, resume it to the end; its final fingerprint."""
    process = start_rlsup("run", job, "--run-dir", run_dir)
    pause_when(process, run_dir, train_step=train_step)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_PAUSED, stderr
    assert envs_mid_episode(run_dir) > 0, "the pause should fall mid-episode"
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    return final_fingerprint(run_dir)


@pytest.mark.parametrize(("name", "num_envs", "total", "pause_at"), [
    ("cartpole", 8, 4_000, 1_500),
    ("breakout", 4, 400, 170),
])
def test_a_vector_paused_mid_episode_resumes_bit_exact(tmp_path: Path, name: str, num_envs: int, total: int,
                                                       pause_at: int) -> None:
    def job(label: str) -> Path:
        if name == "cartpole":
            return with_num_envs(cartpole_job(tmp_path, total_steps=total, name=label), num_envs)
        return with_num_envs(breakout_job(tmp_path, total_steps=total, name=label), num_envs)

    straight = tmp_path / "straight"
    result = run_rlsup("run", job("straight"), "--run-dir", straight)
    assert result.returncode == 0, result.stderr
    assert read_exit(straight).step == total
    assert f"num_envs = {num_envs}" in (straight / "job.toml").read_text()

    resumed = paused_then_resumed(job("paused"), tmp_path / "paused", train_step=pause_at)
    assert resumed == final_fingerprint(straight)
