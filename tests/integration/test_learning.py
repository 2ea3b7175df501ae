"""The example CartPole jobs learn on any seed and any x86-64 CPU, as their own bench says they do.

A trajectory is fixed on one machine but not across CPUs (floating point differs), so these tests treat
each seed as a fresh draw from the distributions bench/learning_seeds.py measured over 20 seeds on this
machine's floating-point path and 20 on another one (--other-floats: MKL's CPU-independent path and
torch's unvectorised kernels, as another CPU would round), and assert only what both support with a
failure rate well below 1 in 100 (the figures are in each test). "Solved" is gymnasium's reward threshold
for CartPole-v1 (a 20-episode greedy mean >= 475), asserted of the best checkpoint; a final policy is held
to CartPole-v0's (195), since on other rounding some finals fall back from a solved best checkpoint.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup_testing import run_rlsup, train_seeds_until

JOBS = Path(__file__).parents[2] / "jobs"
SOLVED = 475   # gymnasium's reward_threshold of CartPole-v1
LEARNED = 195  # gymnasium's reward_threshold of CartPole-v0 (200-step episodes); a random policy gets about 22
EPISODES = 20
# Seeds no training or evaluation stream of the run uses, as in bench/learning_seeds.py.
ENJOY_SEED = 1_000_000


def greedy_mean(run_dir: Path, checkpoint: str) -> float:
    played = run_rlsup("enjoy", run_dir, "--checkpoint", checkpoint, "--episodes", EPISODES, "--seed", ENJOY_SEED,
                       "--json", timeout=300)
    assert played.returncode == 0, played.stderr
    return json.loads(played.stdout)["mean"]


def assert_learns(job: Path, seeds: tuple[int, int], tmp_path: Path, timeout: float,
                  final_threshold: float = SOLVED) -> None:
    """Of two seeds, one has a best checkpoint that solves and one ends its budget at final_threshold.

    Twenty seeds can show a per-seed failure rate of at most a few percent, never below 1 in 100; two
    independent seeds of which one must succeed fail together with that rate squared. Each test below
    gives the bench's counts and the resulting rate, estimated as (failures + 1) / (seeds + 2). The second
    seed trains only when the first falls short (train_seeds_until), which changes no outcome.
    """
    best: dict[Path, float] = {}
    final: dict[Path, float] = {}

    def learned(run_dirs: list[Path]) -> bool:
        for run_dir in run_dirs:
            if run_dir not in best:
                best[run_dir], final[run_dir] = greedy_mean(run_dir, "best"), greedy_mean(run_dir, "latest")
        return max(best.values()) >= SOLVED and max(final.values()) >= final_threshold

    train_seeds_until(job, seeds, tmp_path, timeout, learned)
    named = lambda means: {run_dir.name: mean for run_dir, mean in means.items()}
    assert max(best.values()) >= SOLVED, f"no best checkpoint solves; best: {named(best)}; final: {named(final)}"
    assert max(final.values()) >= final_threshold, \
        f"no seed ends at {final_threshold:g} or more; final: {named(final)}; best checkpoints: {named(best)}"


@pytest.mark.slow
def test_cartpole_dqn_example_learns(tmp_path: Path) -> None:
    """Bench (2-core AVX-512 x86-64): best checkpoint >= 475 on 20/20 seeds, and 20/20 again with
    --other-floats. The final was >= 475 on 20/20 here but only 16/20 with --other-floats (461, 306, 329
    and 206 on the other four: one of two seeds would fail about (5/22)^2 = 5% of the time); it was >= 195
    on 40/40. So: (1/42)^2 for each assertion, about 0.1% in all. With flush_denormals on (as the file is now),
    20 more seeds on a 2-core AMD EPYC: best and final >= 475 on 20/20; and 20 with --other-floats there: best
    20/20, final >= 475 on 16/20 (461, 329, 306 and 206 again, as without flushing), >= 195 on 20/20."""
    assert_learns(JOBS / "cartpole-dqn.toml", (1, 2), tmp_path, timeout=900, final_threshold=LEARNED)


@pytest.mark.slow
def test_cartpole_vtrace_example_learns(tmp_path: Path) -> None:
    """Asynchronous actors make each run a fresh draw, even on one machine.

    Bench (2-core AVX-512 x86-64): best checkpoint >= 475 and final >= 475 on 40/40 seeds idle, 30/30
    beside one or two busy-looping processes, and 20/20 with --other-floats (lowest final 489, lowest best
    495). Yet one CI run (another CPU, the suite's second worker beside it) ended seeds 1 and 2 at 349 and
    279 after best checkpoints of 500: a late fall, which none of these reproduced. So, as for DQN, the
    final is held to 195, which every final seen anywhere met, and "solved" to the best checkpoint, which
    every seed met: (1/92)^2 for each on the bench's 90 seeds, about 0.02% in all."""
    assert_learns(JOBS / "cartpole-vtrace.toml", (1, 2), tmp_path, timeout=900, final_threshold=LEARNED)
