"""MinAtar Breakout over seeds: training return against frames, beside the MinAtar paper's DQN and AC(0.8) curves.

Each seed is a whole `rlsup run` process on a copy of the job file with [job] seed and total_steps changed.
The figure compared is the paper's: the moving average of the last 100 training episodes' returns
(as the agent trains: epsilon-greedy for DQN, sampled from the policy for V-trace), at the same number of
frames (one frame = one agent step in MinAtar). V-trace's episodes count at the learner step that received
them, up to one round of unrolls after they ended.

    pip install -e '.[minatar]'
    python bench/minatar_learning.py [jobs/minatar-breakout-dqn.toml] --seeds 1-3 --steps 300000 [--parallel 2]
    python bench/minatar_learning.py jobs/minatar-breakout-vtrace.toml --seeds 1-3 --parallel 1 --eval

--eval keeps the job's [eval] and prints its greedy means too; --keep DIR keeps the run directories.

The paper's values are read off the curves of Young & Tian 2019 ("MinAtar: An Atari-inspired testbed for
thorough and reproducible reinforcement learning experiments", arXiv:1903.03176; img/learning_curves.gif of
github.com/kenjyoung/MinAtar, the mean of 30 seeds) by the pixel positions of the blue (DQN) and green
(AC(0.8): online actor-critic with eligibility traces, examples/AC_lambda.py) lines, to about +-0.3. They
used all 6 actions (Breakout-v0); rlsup's jobs use Breakout-v1 (3 actions), DQN with Adam at the paper's step
size and V-trace with IMPALA's learner, so the comparison is of the same budget, not the same agent.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from learning_seeds import parse_seeds  # bench/ beside this script

from rlsup.run import files as runfiles
from rlsup import spec as specs

PAPER_DQN_BREAKOUT = {50_000: 1.3, 100_000: 4.4, 150_000: 5.3, 200_000: 6.1, 250_000: 6.7, 300_000: 7.3,
                      400_000: 8.2, 500_000: 8.3, 750_000: 8.9, 1_000_000: 9.2, 2_000_000: 9.6}
PAPER_AC_BREAKOUT = {50_000: 3.2, 100_000: 3.8, 150_000: 4.5, 200_000: 5.1, 250_000: 5.6, 300_000: 6.0,
                     400_000: 6.5, 500_000: 7.0, 750_000: 8.5, 1_000_000: 9.9, 2_000_000: 14.2}  # AC(0.8)
WINDOW = 100  # episodes in the paper's moving average
DEFAULT_JOB = Path(__file__).parents[1] / "jobs" / "minatar-breakout-dqn.toml"


@dataclass
class SeedRun:
    episodes: list[tuple[int, float]]  # (step, return) of every training episode
    evaluations: list[tuple[int, float]]  # (step, greedy mean) of every [eval] the job ran
    wall_s: float


def train(job: Path, seed: int, steps: int, directory: Path, evaluate: bool) -> SeedRun:
    """Every training episode and evaluation of one seed, and its wall time."""
    spec = specs.load(job).replace("job", seed=seed, total_steps=steps)
    if not evaluate:
        spec = spec.replace("eval", every_steps=0)
    copy = directory / f"seed-{seed}.toml"
    copy.write_text(spec.to_toml())
    run_dir = directory / f"run-{seed}"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(copy), "--run-dir", str(run_dir)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"seed {seed}: rlsup run exited {result.returncode}: {result.stderr.strip()}")
    records = runfiles.read_metrics(run_dir)
    return SeedRun(episodes=[(record["step"], record["return"]) for record in records
                             if record["kind"] == "episode"],
                   evaluations=[(record["step"], record["mean"]) for record in records if record["kind"] == "eval"],
                   wall_s=time.monotonic() - started)


def moving_average_at(episodes: list[tuple[int, float]], frames: int) -> float | None:
    """The mean return of the last WINDOW episodes that ended by frames."""
    ended = [episode_return for step, episode_return in episodes if step <= frames][-WINDOW:]
    return statistics.fmean(ended) if ended else None


def print_training(results: list[SeedRun], steps: int) -> None:
    """The 100-episode training average per seed at the paper's marks (and at the budget)."""
    print(f"{'frames':>10}  {'paper DQN':>9}  {'paper AC':>8}  {'rlsup mean':>10}  per seed")
    for frames in [mark for mark in PAPER_DQN_BREAKOUT if mark <= steps] + ([steps] if steps not in
                                                                              PAPER_DQN_BREAKOUT else []):
        values = [moving_average_at(result.episodes, frames) for result in results]
        papers = f"{paper_text(PAPER_DQN_BREAKOUT, frames, 9)}  {paper_text(PAPER_AC_BREAKOUT, frames, 8)}"
        print(f"{frames:>10,}  {papers}  {mean_text(values)}  " + per_seed_text(values))


def print_evaluations(results: list[SeedRun]) -> None:
    """The job's greedy [eval] means per seed, at every step any seed evaluated."""
    print(f"{'eval step':>10}  {'greedy mean':>11}  per seed")
    for step in sorted({step for result in results for step, _ in result.evaluations}):
        values = [dict(result.evaluations).get(step) for result in results]
        print(f"{step:>10,}  {mean_text(values):>11}  " + per_seed_text(values))


def paper_text(curve: dict[int, float], frames: int, width: int) -> str:
    value = curve.get(frames)
    return f"{value:{width}.1f}" if value is not None else f"{'-':>{width}}"


def mean_text(values: list[float | None]) -> str:
    known = [value for value in values if value is not None]
    return f"{statistics.fmean(known):10.2f}" if known else f"{'-':>10}"


def per_seed_text(values: list[float | None]) -> str:
    return " ".join("-" if value is None else f"{value:.2f}" for value in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", nargs="?", type=Path, default=DEFAULT_JOB)
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--steps", type=int, default=None, help="frames per seed (default: the job's budget)")
    parser.add_argument("--parallel", type=int, default=2, help="seeds trained side by side")
    parser.add_argument("--eval", action="store_true",
                        help="keep the job's [eval] and print its greedy means (default: no evaluation)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="put the run directories here and keep them (default: a temporary directory)")
    args = parser.parse_args()
    steps = args.steps or specs.load(args.job).job.total_steps
    seeds = parse_seeds(args.seeds)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with (nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(prefix="rlsup-minatar-")) \
            as directory, ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda seed: train(args.job, seed, steps, Path(directory), args.eval), seeds))
    print(f"{args.job.name}: seeds {args.seeds}, {steps:,} frames each, wall "
          + ", ".join(f"{result.wall_s:.0f} s" for result in results))
    print_training(results, steps)
    if args.eval:
        print_evaluations(results)


if __name__ == "__main__":
    main()
