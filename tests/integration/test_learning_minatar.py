"""The MinAtar V-trace example learns Breakout on a short budget, on any seed and any x86-64 CPU.

Kept apart from test_learning.py so that the suite's two workers (pytest-xdist, --dist loadfile) train
it beside the CartPole examples instead of after them. The threshold comes from a 40-seed bench (below).
It trained the DQN example until session 36: 195 s of the suite for 40,000 frames, where V-trace, the
algorithm the MinAtar goals (issue 26) are measured on, shows learning in 100,000 frames and about 20 s.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.spec import experiments
from rlsup_testing import train_seeds_until

JOBS = Path(__file__).parents[2] / "jobs"
EPISODES = 20
BREAKOUT = "MinAtar/Breakout-v1"

# jobs/minatar-vtrace.toml's Breakout member, as `rlsup submit` makes it, on a short budget.
MINATAR_STEPS = 100_000
MINATAR_THRESHOLD = 2.0


def breakout_member(steps: int) -> specs.JobSpec:
    """The sweep's Breakout job (its own entropy cost included), cut to `steps` frames and one evaluation."""
    path = JOBS / "minatar-vtrace.toml"
    loaded = specs.load(path)
    planned = experiments.plan(specs.sweep_of(path.read_text(), file=str(path)), None, loaded.job.name)
    member = next(job for job in planned if job.values["env.id"] == BREAKOUT)
    spec = experiments.variant_spec(loaded, member).replace("job", total_steps=steps)
    return spec.replace("eval", every_steps=steps, episodes=EPISODES).replace("checkpoint", every_steps=steps)


@pytest.mark.slow
def test_minatar_breakout_vtrace_learns_on_a_short_budget(tmp_path: Path) -> None:
    """The greedy mean of a 20-episode evaluation at 100,000 frames is >= 2.0 on one seed of two; random
    play scores about 0.5 a game. Bench (bench/learning_seeds.py on this member at 100,000 frames, entropy cost
    0.02 and no gradient clip as the file has them since session 43, evaluations every 50,000, seeds 1-20,
    2-core Intel Xeon, no GPU, one seed at a time beside a MinAtar V-trace bench, the actors asynchronous as
    here): at 100,000 frames 3.1 to 5.4, median 3.93 (25-30 s a seed); with --other-floats (another CPU's
    rounding) 2.8 to 5.25, median 3.83. With the clip of 40 it had until then (200,000 frames, 2-core AMD EPYC):
    2.75 to 5.55 and 2.35 to 5.05.
    Below 2.0 on 0 of 40 seeds: at most about 1/42 per seed, so this test fails about (1/42)^2 = 0.06% of
    the time at most."""
    pytest.importorskip("minatar")
    job = tmp_path / "minatar-breakout-vtrace-short.toml"
    job.write_text(breakout_member(MINATAR_STEPS).to_toml())
    final: dict[str, float] = {}

    def learned(run_dirs: list[Path]) -> bool:
        for run_dir in run_dirs:
            evaluations = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "eval"]
            assert evaluations and evaluations[-1]["step"] == MINATAR_STEPS, evaluations
            final[run_dir.name] = evaluations[-1]["mean"]
        return max(final.values()) >= MINATAR_THRESHOLD

    # The second seed trains only when the first falls short: the same outcome as training both.
    train_seeds_until(job, (1, 2), tmp_path, 900, learned)
    assert max(final.values()) >= MINATAR_THRESHOLD, f"no seed's greedy mean reaches {MINATAR_THRESHOLD}: {final}"
