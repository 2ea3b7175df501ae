"""The continuous-action examples learn on any seed and any x86-64 CPU, as their own bench says they do.

Each seed is a fresh draw from the distribution bench/learning_seeds.py measured over 20 seeds on this
machine's floating-point path and 20 on --other-floats (MKL's CPU-independent path and torch's unvectorised
kernels, as another CPU would round); a test asserts only what both support, with its failure rate in its
docstring. "Solved" is gymnasium's customary mark for Pendulum-v1: a 20-episode greedy mean above -200 (it
has no reward_threshold; a random policy scores about -1,200, a swing-up and balance about -150).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup_testing import run_rlsup, train_seeds_until

JOBS = Path(__file__).parents[2] / "jobs"
SOLVED = -200
EPISODES = 20
ENJOY_SEED = 1_000_000  # a seed no training or evaluation stream of the run uses, as in bench/learning_seeds.py


def final_greedy_mean(run_dir: Path) -> float:
    played = run_rlsup("enjoy", run_dir, "--episodes", EPISODES, "--seed", ENJOY_SEED, "--json", timeout=300)
    assert played.returncode == 0, played.stderr
    return json.loads(played.stdout)["mean"]


@pytest.mark.slow
def test_pendulum_sac_example_solves_within_its_budget(tmp_path: Path) -> None:
    """Of seeds 1, 2 and 3, one ends its 10,000 steps with a greedy mean above -200 (issue 52 asks 20,000).

    Bench (2-core AMD EPYC, results/pendulum-sac.json and pendulum-sac-other-floats.json): the final greedy mean
    was above -200 on 18/20 seeds and on 17/20 with --other-floats (the others -377, -245; -425, -402, -548: a
    late wobble, whose best checkpoints were all between -205.8 and -157). A seed fails with a rate estimated at
    (5 + 1) / (40 + 2) = 0.14, and three together at 0.3%; the third trains only when the first two fail."""
    finals: dict[str, float] = {}

    def solved(run_dirs: list[Path]) -> bool:
        for run_dir in run_dirs:
            finals.setdefault(run_dir.name, final_greedy_mean(run_dir))
        return max(finals.values()) > SOLVED

    train_seeds_until(JOBS / "pendulum-sac.toml", (1, 2, 3), tmp_path, timeout=900, passed=solved)
    assert max(finals.values()) > SOLVED, f"no seed ends above {SOLVED}: {finals}"


@pytest.mark.slow
def test_pendulum_vtrace_example_solves_within_its_budget(tmp_path: Path) -> None:
    """Of seeds 1 to 5, one ends its 800,000 consumed steps (about 200,000 env steps) with a greedy mean above -200.

    Bench (2-core AMD EPYC, results/pendulum-vtrace.json and pendulum-vtrace-other-floats.json): above -200 on
    13/20 seeds and 14/20 with --other-floats (most others between -207 and -294; -686 and -1,326 never swung
    up). A seed fails with a rate estimated at (13 + 1) / (40 + 2) = 0.33, and five together at 0.4%; each seed
    after the first trains only when those before it failed (seed 1 solved on both paths)."""
    finals: dict[str, float] = {}

    def solved(run_dirs: list[Path]) -> bool:
        for run_dir in run_dirs:
            finals.setdefault(run_dir.name, final_greedy_mean(run_dir))
        return max(finals.values()) > SOLVED

    train_seeds_until(JOBS / "pendulum-vtrace.toml", (1, 2, 3, 4, 5), tmp_path, timeout=900, passed=solved)
    assert max(finals.values()) > SOLVED, f"no seed ends above {SOLVED}: {finals}"
