"""Envs without a capturer resume by action replay: bit-exact where deterministic, a fresh episode where not."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from plugins.replay_test_envs import COUNTER_ID, NOISY_ID
from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.run.status import read_worker_status
from rlsup.checkpoint.manifest import ENV_RESTART_MARK, list_checkpoints
from rlsup.checkpoint.store import load_checkpoint
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup.jobs.state import State
from rlsup_testing import cartpole_text, final_fingerprint, metric_steps, pause_when, run_rlsup, start_rlsup

PLUGIN = Path(__file__).parent.parent / "plugins" / "replay_test_envs"

def dqn_job(directory: Path, name: str, *, env_id: str, total_steps: int, num_envs: int = 1,
            imports: tuple[str, ...] = ()) -> Path:
    """The small CartPole DQN job of every suite, on another env."""
    text = cartpole_text(seed=4, total_steps=total_steps, checkpoint_every=1000, log_every=50)
    env = f'id = "{env_id}"\nnum_envs = {num_envs}\nimports = {json.dumps(list(imports))}'
    path = directory / f"{name}.toml"
    path.write_text(text.replace('id = "CartPole-v1"', env))
    return path


@pytest.fixture
def replay_envs_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test envs' package in a temporary directory on the PYTHONPATH of every process started here and
    on this one's sys.path, as a user's package that registers envs would be; jobs name it in [env] imports."""
    site = tmp_path / "site-packages"
    shutil.copytree(PLUGIN, site / PLUGIN.name, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(site))
    yield site


def paused_mid_episode(job: Path, run_dir: Path, *, train_step: int, tries: int = 5) -> None:
    """Run job into run_dir and SIGINT it past train_step as a user's Ctrl-C would; while the pause finds
    every env on an episode's first step (nothing to replay), resume and pause again a little later."""
    process = start_rlsup("run", job, "--run-dir", run_dir)
    for _ in range(tries):
        pause_when(process, run_dir, train_step=train_step)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == EXIT_PAUSED, stderr
        if max(replayed_actions(run_dir)) > 0:
            return
        train_step = read_exit(run_dir).step + 1
        process = start_rlsup("run", "--resume", run_dir)
    raise AssertionError(f"{tries} pauses in a row fell on episode boundaries")


def replayed_actions(run_dir: Path) -> list[int]:
    """How many actions each env's state in the newest checkpoint holds for replay (mid-episode: > 0)."""
    _, state = load_checkpoint(list_checkpoints(run_dir)[-1].path)
    return [len(env["replay"]["actions"]) for env in state["trainer"]["envs"].values()]


def assert_resumes_bit_exact(tmp_path: Path, env_id: str, *, total_steps: int, train_step: int,
                             imports: tuple[str, ...] = ()) -> None:
    straight = tmp_path / "straight"
    job = dqn_job(tmp_path, "job", env_id=env_id, total_steps=total_steps, num_envs=2, imports=imports)
    result = run_rlsup("run", job, "--run-dir", straight)
    assert result.returncode == 0, result.stderr
    # gymnasium calls every id with a newer version "out of date"; MinAtar's -v0 (all 6 actions, as the
    # paper) is chosen on purpose by rlsup's own job files, so its users are not told to "upgrade".
    assert "is out of date" not in result.stdout + result.stderr
    paused = tmp_path / "paused"
    paused_mid_episode(job, paused, train_step=train_step)
    result = run_rlsup("run", "--resume", paused)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(paused) == final_fingerprint(straight)
    assert ENV_RESTART_MARK not in run_rlsup("checkpoints", paused).stdout


def test_lunarlander_resumes_bit_exact_by_action_replay(tmp_path: Path) -> None:
    pytest.importorskip("Box2D")
    assert_resumes_bit_exact(tmp_path, "LunarLander-v3", total_steps=1_500, train_step=600)


@pytest.mark.parametrize("env_id", ["MinAtar/Breakout-v1", "MinAtar/Breakout-v0"])  # minimal and all 6 actions
def test_minatar_breakout_resumes_bit_exact_by_action_replay(tmp_path: Path, env_id: str) -> None:
    pytest.importorskip("minatar")
    assert_resumes_bit_exact(tmp_path, env_id, total_steps=1_500, train_step=600)


def test_a_user_env_named_in_imports_resumes_bit_exact(tmp_path: Path, replay_envs_on_path: Path) -> None:
    assert_resumes_bit_exact(tmp_path, COUNTER_ID, total_steps=1_500, train_step=600, imports=(PLUGIN.name,))


def test_a_non_deterministic_env_restarts_its_episode_says_so_everywhere_and_the_run_completes(
        harness, replay_envs_on_path: Path) -> None:
    # Room after the pause at 1,100: under load the pause request reaches the worker late, and a run that
    # ends first is never paused (a single failure in a loaded -n 2 run had a budget of 3,000).
    total_steps = 5_000
    path = dqn_job(harness.jobs_directory, "noisy", env_id=NOISY_ID, total_steps=total_steps, imports=(PLUGIN.name,))
    path.write_text(path.read_text().replace("keep = 3", "keep = 10"))  # the listing shows the pause's too
    job = harness.submit(path)
    run_dir = Path(job.run_dir)
    harness.start_daemon()
    harness.wait_step(job.id, 1_100)
    harness.cli("pause", job.id)
    harness.wait_state(job.id, State.PAUSED)
    paused_step = read_exit(run_dir).step
    harness.cli("resume", job.id)
    harness.wait_state(job.id, State.DONE, timeout=180)

    sentence = f"env 0 ({NOISY_ID}): replaying the "
    log_lines = [line for line in (run_dir / paths.LOG_FILE).read_text().splitlines() if sentence in line]
    assert len(log_lines) == 1 and "WARNING" in log_lines[0] and "not deterministic" in log_lines[0]
    assert sentence in read_worker_status(run_dir).notice
    events = harness.wait_for(lambda: [event for event in harness.events(job.id, "checkpoint")
                                       if sentence in event.message], what="the restart as an event",
                              report=lambda: harness.report(job.id))
    assert len(events) == 1

    listing = json.loads(harness.cli("checkpoints", run_dir, "--json")[1])
    kept = sorted({*range(1_000, total_steps + 1, 1_000), paused_step})
    assert [(row["step"], ENV_RESTART_MARK in row["label"]) for row in listing] == [
        (step, step > paused_step) for step in kept]
    assert all(sentence in row["extra"]["env_restarts"][0] for row in listing if row["step"] > paused_step)
    assert ENV_RESTART_MARK in harness.cli("checkpoints", run_dir)[1]

    # The episode in flight was dropped: the first one to end after the resume began at the resume.
    first_after = next(record for record in runfiles.read_metrics(run_dir)
                       if record["kind"] == "episode" and record["step"] > paused_step)
    assert first_after["length"] == first_after["step"] - paused_step
    assert metric_steps(run_dir, "checkpoint")[-1] == total_steps
