"""The example DQN job learns: CartPole solved (greedy mean >= 475) within its own budget."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup import runfiles
from rlsup_testing import run_rlsup

JOBS = Path(__file__).parents[2] / "jobs"
SOLVED = 475


@pytest.mark.slow
def test_cartpole_dqn_example_solves_cartpole(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_rlsup("run", JOBS / "cartpole-dqn.toml", "--run-dir", run_dir, timeout=900)
    assert result.returncode == 0, result.stderr
    evaluations = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "eval"]
    assert evaluations[-1]["step"] == 50_000
    assert evaluations[-1]["mean"] >= SOLVED, [record["mean"] for record in evaluations]

    played = run_rlsup("enjoy", run_dir, "--episodes", "5", "--seed", "123", "--json")
    assert played.returncode == 0, played.stderr
    assert json.loads(played.stdout)["mean"] >= SOLVED
