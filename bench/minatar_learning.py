"""MinAtar Breakout DQN over seeds: training return against frames, beside the MinAtar paper's DQN curve.

Each seed is a whole `rlsup run` process on a copy of the job file with [job] seed and total_steps changed.
The figure compared is the paper's: the moving average of the last 100 training episodes' returns
(epsilon-greedy, as the agent trains), at the same number of frames (one frame = one agent step in MinAtar).

    pip install -e '.[minatar]'
    python bench/minatar_learning.py [jobs/minatar-breakout-dqn.toml] --seeds 1-3 --steps 300000 [--parallel 2]

The paper's values are read off the DQN curve of Young & Tian 2019 ("MinAtar: An Atari-inspired testbed
for thorough and reproducible reinforcement learning experiments", arXiv:1903.03176; img/learning_curves.gif
of github.com/kenjyoung/MinAtar, the mean of 30 seeds) by the pixel positions of its blue line, to about
+-0.3. Their DQN used all 6 actions (Breakout-v0) and centered RMSProp; rlsup's job uses Breakout-v1 (3
actions) and Adam at the same step size, so the comparison is of the same budget, not the same agent.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from learning_seeds import parse_seeds  # bench/ beside this script

from rlsup import runfiles
from rlsup import spec as specs

PAPER_DQN_BREAKOUT = {50_000: 1.3, 100_000: 4.4, 150_000: 5.3, 200_000: 6.1, 250_000: 6.7, 300_000: 7.3,
                      400_000: 8.2, 500_000: 8.3, 750_000: 8.9, 1_000_000: 9.2, 2_000_000: 9.6}
WINDOW = 100  # episodes in the paper's moving average
DEFAULT_JOB = Path(__file__).parents[1] / "jobs" / "minatar-breakout-dqn.toml"


def train(job: Path, seed: int, steps: int, directory: Path) -> tuple[list[tuple[int, float]], float]:
    """(step, return) of every training episode of one seed, and its wall time."""
    spec = specs.load(job).replace("job", seed=seed, total_steps=steps).replace("eval", every_steps=0)
    copy = directory / f"seed-{seed}.toml"
    copy.write_text(spec.to_toml())
    run_dir = directory / f"run-{seed}"
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(copy), "--run-dir", str(run_dir)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"seed {seed}: rlsup run exited {result.returncode}: {result.stderr.strip()}")
    episodes = [(record["step"], record["return"]) for record in runfiles.read_metrics(run_dir)
                if record["kind"] == "episode"]
    return episodes, time.monotonic() - started


def moving_average_at(episodes: list[tuple[int, float]], frames: int) -> float | None:
    """The mean return of the last WINDOW episodes that ended by frames."""
    ended = [episode_return for step, episode_return in episodes if step <= frames][-WINDOW:]
    return statistics.fmean(ended) if ended else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", nargs="?", type=Path, default=DEFAULT_JOB)
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--steps", type=int, default=None, help="frames per seed (default: the job's budget)")
    parser.add_argument("--parallel", type=int, default=2, help="seeds trained side by side")
    args = parser.parse_args()
    steps = args.steps or specs.load(args.job).job.total_steps
    seeds = parse_seeds(args.seeds)
    with tempfile.TemporaryDirectory(prefix="rlsup-minatar-") as directory, \
            ThreadPoolExecutor(args.parallel) as pool:
        results = list(pool.map(lambda seed: train(args.job, seed, steps, Path(directory)), seeds))
    print(f"{args.job.name}: {len(seeds)} seeds, {steps:,} frames each, wall "
          + ", ".join(f"{wall:.0f} s" for _, wall in results))
    print(f"{'frames':>10}  {'paper DQN':>9}  {'rlsup mean':>10}  per seed")
    for frames in [mark for mark in PAPER_DQN_BREAKOUT if mark <= steps] + ([steps] if steps not in
                                                                              PAPER_DQN_BREAKOUT else []):
        values = [moving_average_at(episodes, frames) for episodes, _ in results]
        known = [value for value in values if value is not None]
        mean = f"{statistics.fmean(known):10.2f}" if known else f"{'-':>10}"
        paper = PAPER_DQN_BREAKOUT.get(frames)
        paper_text = f"{paper:9.1f}" if paper is not None else f"{'-':>9}"
        print(f"{frames:>10,}  {paper_text}  {mean}  " + " ".join("-" if value is None else f"{value:.2f}"
                                                                  for value in values))


if __name__ == "__main__":
    main()
