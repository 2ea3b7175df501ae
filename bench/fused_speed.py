"""The MinAtar V-trace example against its fused twin, whole processes side by side: wall time, frames/s, return.

jobs/minatar-vtrace.toml (gymnasium's MinAtar, two actor processes and a learner) and jobs/minatar-vtrace-fused.toml
(the same game as a fused batch, games, acting and learning in one process), each trained on one game for the same
frames by `rlsup run` as a user runs it, start-up and the final checkpoint included, one after another so that
neither shares the CPUs with the other. The figure compared is each run's wall time for the budget, beside the
return it reached (the mean of its last 100 training episodes, as bench/minatar_learning.py reads it): issue 53
asks the fused example to reach the example's 5M-frame result in at most half the time.

    pip install -e '.[minatar,jax]'
    python bench/fused_speed.py [--game Breakout] [--frames 5000000] [--seed 1]

The result (bench/results_format.py) goes to --out, by default results/fused-speed-minatar-GAME.json.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results_format  # bench/ beside this script
from learning_seeds import changed_job
from minatar_learning import game_values
from minatar_paper import moving_average_at

from rlsup.run import files as runfiles

JOBS = Path(__file__).resolve().parents[1] / "jobs"
EXAMPLES = {"actor processes": JOBS / "minatar-vtrace.toml", "fused": JOBS / "minatar-vtrace-fused.toml"}


def timed_run(job: Path, game: str, frames: int, seed: int, directory: Path) -> dict:
    """One whole `rlsup run` of the job's member for game (its [sweep]'s id and linked settings, as `rlsup submit`
    makes it): wall seconds, frames reached, and the return."""
    linked = game_values(job, game, [])
    settings = [f"job.seed={seed}", f"vtrace.lr_end_step={frames}", "eval.every_steps=0",
                *(f"{name}={value!r}".replace("'", '"') for name, value in linked.items())]
    copy = changed_job(job, frames, settings, directory)
    run_dir = directory / job.stem
    began = time.monotonic()
    finished = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(copy), "--run-dir", str(run_dir)],
                              capture_output=True, text=True)
    wall = time.monotonic() - began
    if finished.returncode != 0:
        raise SystemExit(f"fused_speed: {job.name} failed: {finished.stderr.strip().splitlines()[-1:]}")
    records = runfiles.read_metrics(run_dir)
    episodes = [(record["step"], record["return"]) for record in records if record["kind"] == "episode"]
    reached = max(record["step"] for record in records if record["kind"] == "train")
    return {"wall_s": wall, "frames": reached, "frames_per_s": reached / wall,
            "mean_return_100": moving_average_at(episodes, reached)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--frames", type=int, default=5_000_000)
    parser.add_argument("--seed", type=int, default=1)
    results_format.add_out_argument(parser, "results/fused-speed-minatar-GAME.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/fused_speed.py")
    measured = {}
    with tempfile.TemporaryDirectory(prefix="rlsup-fused-speed-") as directory:
        for name, job in EXAMPLES.items():
            measured[name] = timed_run(job, arguments.game, arguments.frames, arguments.seed, Path(directory))
            print(f"{name:>16}: {measured[name]}", flush=True)
    ratio = measured["fused"]["wall_s"] / measured["actor processes"]["wall_s"]
    print(f"fused wall time / actor processes' wall time: {ratio:.2f} (issue 53 asks at most 0.5)")
    column = results_format.column
    columns = [column("wall", "s", 0), column("frames", "frames", 0), column("frames/s", "frames/s", 0),
               column("mean return of the last 100 episodes", None, 2)]
    rows = {f"{name} ({job.name})": [figures["wall_s"], figures["frames"], figures["frames_per_s"],
                                     figures["mean_return_100"]]
            for (name, job), figures in zip(EXAMPLES.items(), measured.values())}
    table = results_format.measurement(f"MinAtar {arguments.game}, seed {arguments.seed}", "example", columns, rows,
                                       "Whole `rlsup run` processes, one after the other, start-up included.")
    finding = (f"The fused example trained {arguments.frames:,} frames of {arguments.game} in {ratio:.2f} of the "
               f"actor-process example's wall time.")
    results_format.write_figures(arguments, run, f"fused-speed-minatar-{arguments.game.lower()}",
                                 f"MinAtar {arguments.game}: the fused V-trace example against the actor-process one",
                                 [table], finding, seeds=[arguments.seed])
    return 0


if __name__ == "__main__":
    sys.exit(main())
