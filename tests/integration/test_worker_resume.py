"""`rlsup run` in real processes: pause by SIGINT, resume with an edited spec, bit-exact fingerprints."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rlsup.run import files as runfiles
from rlsup.run.status import read_worker_status
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup_testing import (breakout_job, cartpole_job, checkpoint_reasons, final_fingerprint, metric_steps,
                            pause_when, run_rlsup, start_rlsup)

STEPS = 6_000


@pytest.fixture(scope="module")
def straight_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """Uninterrupted reference runs of the small CartPole job, by budget."""
    directory = tmp_path_factory.mktemp("straight")
    runs = {}
    for total in (STEPS // 2, STEPS):
        run_dir = directory / f"run-{total}"
        result = run_rlsup("run", cartpole_job(directory, total_steps=total, name=f"job-{total}"),
                           "--run-dir", run_dir)
        assert result.returncode == 0, result.stderr
        runs[total] = run_dir
    return runs


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A straight run evaluated every 1,000 steps, with other log and checkpoint intervals than the job's."""
    directory = tmp_path_factory.mktemp("evaluated")
    job = cartpole_job(directory, total_steps=STEPS, eval_every=1_000, log_every=100, checkpoint_every=700)
    result = run_rlsup("run", job, "--run-dir", directory / "run")
    assert result.returncode == 0, result.stderr
    return directory / "run"


def test_run_prints_its_run_dir_and_writes_the_run_files(straight_runs: dict[int, Path]) -> None:
    run_dir = straight_runs[STEPS]
    for name in ("job.toml", "status.json", "metrics.jsonl", "worker.log", "exit.json", "spec-history/0001.toml"):
        assert (run_dir / name).exists(), name
    exit_record = read_exit(run_dir)
    assert (exit_record.code, exit_record.step) == (0, STEPS)
    status = read_worker_status(run_dir)
    assert (status.phase, status.step, status.total_steps) == ("done", STEPS, STEPS)
    assert checkpoint_reasons(run_dir)[-1] == (STEPS, "final")
    assert "total_steps = 6000" in (run_dir / "job.toml").read_text()


def test_pause_by_sigint_then_resume_is_bit_exact(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    job = cartpole_job(tmp_path, total_steps=STEPS)
    run_dir = tmp_path / "run"
    process = start_rlsup("run", job, "--run-dir", run_dir)
    pause_when(process, run_dir, train_step=1_750)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    paused_step = read_exit(run_dir).step
    assert 1_750 <= paused_step < STEPS
    assert checkpoint_reasons(run_dir)[-1] == (paused_step, "pause")

    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(run_dir) == final_fingerprint(straight_runs[STEPS])
    assert_metrics_continuous(run_dir, total=STEPS, log_every=250)


def test_raising_the_budget_continues_as_if_it_had_been_there_from_the_start(
        tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(straight_runs[STEPS // 2], run_dir)
    edited = cartpole_job(tmp_path, total_steps=STEPS, name="edited")
    result = run_rlsup("run", "--resume", run_dir, edited)
    assert result.returncode == 0, result.stderr
    assert "job.total_steps: 3000 -> 6000" in result.stderr
    assert read_exit(run_dir).step == STEPS
    assert final_fingerprint(run_dir) == final_fingerprint(straight_runs[STEPS])
    assert_metrics_continuous(run_dir, total=STEPS, log_every=250)
    assert len(list((run_dir / "spec-history").glob("*.toml"))) == 2


def test_identity_edits_are_refused_naming_each_field(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(straight_runs[STEPS // 2], run_dir)
    edited = cartpole_job(tmp_path, total_steps=STEPS, seed=8, name="edited")
    edited.write_text(edited.read_text().replace("lr = 1e-3", "lr = 5e-4"))
    before = (run_dir / "job.toml").read_text()
    result = run_rlsup("run", "--resume", run_dir, edited)
    assert result.returncode == 2
    assert "dqn.lr: 0.001 -> 0.0005" in result.stderr and "job.seed: 7 -> 8" in result.stderr
    assert (run_dir / "job.toml").read_text() == before


def test_a_reached_budget_exits_at_once_with_a_clear_message(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(straight_runs[STEPS // 2], run_dir)
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0
    assert "already reached" in result.stderr
    assert checkpoint_reasons(run_dir) == checkpoint_reasons(straight_runs[STEPS // 2])


def test_live_fields_never_bend_training(evaluated_run: Path, straight_runs: dict[int, Path]) -> None:
    """Evaluation on, other log and checkpoint intervals: the same trajectory, bit for bit."""
    assert metric_steps(evaluated_run, "eval") == [1000, 2000, 3000, 4000, 5000, 6000]
    assert final_fingerprint(evaluated_run) == final_fingerprint(straight_runs[STEPS])
    assert_best_checkpoint_is_the_best_evaluation(evaluated_run)


def assert_best_checkpoint_is_the_best_evaluation(run_dir: Path) -> None:
    """The best checkpoint holds the first evaluation that beat every earlier one, and enjoy plays it."""
    evaluations = [(record["step"], record["mean"]) for record in runfiles.read_metrics(run_dir)
                   if record["kind"] == "eval"]
    best_mean = max(mean for _, mean in evaluations)
    best_step = next(step for step, mean in evaluations if mean == best_mean)
    listing = json.loads(run_rlsup("checkpoints", run_dir, "--json", "--verify").stdout)
    bests = [row for row in listing if row["reason"] == "best"]
    assert [(row["step"], row["evaluation_mean"], row["verified"]) for row in bests][-1] == (best_step, best_mean, True)
    assert f"best (eval {best_mean:g})" in run_rlsup("checkpoints", run_dir).stdout
    played = run_rlsup("enjoy", run_dir, "--checkpoint", "best", "--episodes", "1", "--json")
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout)["checkpoint"] == f"step-{best_step:012d}-best"


def test_a_resumed_run_remembers_its_best_evaluation(tmp_path: Path, evaluated_run: Path) -> None:
    """Only an evaluation that beats every earlier one, before the pause as well, writes a best checkpoint."""
    # The straight run evaluates at the same steps; its other intervals never bend training (the test above).
    straight, paused = evaluated_run, tmp_path / "paused"
    process = start_rlsup("run", cartpole_job(tmp_path, total_steps=STEPS, eval_every=1_000, name="again"),
                          "--run-dir", paused)
    pause_when(process, paused, train_step=1_250)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    result = run_rlsup("run", "--resume", paused)
    assert result.returncode == 0, result.stderr
    bests = best_checkpoint_steps(straight)
    assert best_checkpoint_steps(paused) == bests
    # The check has teeth: an evaluation after the pause did not beat the best, so a forgotten best would show.
    assert any(step > 1_250 and step not in bests for step in metric_steps(straight, "eval"))


def best_checkpoint_steps(run_dir: Path) -> list[int]:
    return [record["step"] for record in runfiles.read_metrics(run_dir)
            if record["kind"] == "checkpoint" and record["reason"] == "best"]


def test_a_second_run_into_the_same_directory_is_refused(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    result = run_rlsup("run", cartpole_job(tmp_path, total_steps=10), "--run-dir", straight_runs[STEPS])
    assert result.returncode == 2 and "--resume" in result.stderr


def test_checkpoints_lists_and_verifies(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(straight_runs[STEPS], run_dir)
    listing = json.loads(run_rlsup("checkpoints", run_dir, "--json", "--verify").stdout)
    assert [row["step"] for row in listing] == [4000, 5000, 6000]
    assert all(row["verified"] and row["bytes"] > 0 and len(row["fingerprint"]) == 64 for row in listing)
    assert {"step", "reason", "path", "bytes", "fingerprint", "verified"} <= set(listing[0])

    newest = Path(listing[-1]["path"])
    victim = max((path for path in newest.rglob("*") if path.is_file() and path.name != "manifest.json"),
                 key=lambda path: path.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    result = run_rlsup("checkpoints", run_dir, "--verify")
    assert result.returncode == 1 and "NO" in result.stdout
    listing = json.loads(run_rlsup("checkpoints", run_dir, "--json", "--verify").stdout)
    assert [row["verified"] for row in listing] == [True, True, False]


def test_enjoy_plays_a_copied_run_with_nothing_else_around(tmp_path: Path, straight_runs: dict[int, Path]) -> None:
    copy = tmp_path / "elsewhere" / "copied-run"
    shutil.copytree(straight_runs[STEPS], copy)
    result = run_rlsup("enjoy", copy, "--episodes", "3", "--seed", "5", "--json")
    assert result.returncode == 0, result.stderr
    played = json.loads(result.stdout)
    assert len(played["returns"]) == 3 and played["mean"] == pytest.approx(sum(played["returns"]) / 3)
    again = json.loads(run_rlsup("enjoy", copy, "--episodes", "3", "--seed", "5", "--json").stdout)
    assert again == played
    text = run_rlsup("enjoy", copy, "--checkpoint", "4000", "--episodes", "1")
    assert "step 4000" in text.stdout and "mean return" in text.stdout


def test_atari_pause_mid_episode_resumes_bit_exact(tmp_path: Path) -> None:
    total = 400
    straight = tmp_path / "straight"
    result = run_rlsup("run", breakout_job(tmp_path, total_steps=total), "--run-dir", straight)
    assert result.returncode == 0, result.stderr

    paused = tmp_path / "paused"
    process = start_rlsup("run", breakout_job(tmp_path, total_steps=total, name="again"), "--run-dir", paused)
    pause_when(process, paused, train_step=170)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    paused_step = read_exit(paused).step
    assert paused_step not in metric_steps(paused, "episode"), "the pause should fall mid-episode"

    result = run_rlsup("run", "--resume", paused)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(paused) == final_fingerprint(straight)
    assert metric_steps(paused, "episode") == metric_steps(straight, "episode")


def assert_metrics_continuous(run_dir: Path, *, total: int, log_every: int) -> None:
    """Every train line exactly once, none from a future thrown away on resume."""
    assert metric_steps(run_dir, "train") == list(range(log_every, total + 1, log_every))
    episode_steps = metric_steps(run_dir, "episode")
    assert episode_steps == sorted(episode_steps) and not [s for s, n in Counter(episode_steps).items() if n > 1]
