"""MinAtar over games and seeds: training return against frames, beside the MinAtar paper's curves and a peer's.

Each seed is a whole `rlsup run` process on a copy of the job file with [job] seed and total_steps (and,
with --games, [env] id) changed. The figure compared is the paper's: the mean return of the last 100
training episodes (as the agent trains: epsilon-greedy for DQN, sampled from the policy for V-trace), at
the same number of frames (one frame = one agent step in MinAtar). V-trace's episodes count at the learner
step that received them, up to one round of unrolls after they ended. The paper's values are in
bench/minatar_paper.py; a peer's (bench/peers/sb3_minatar.py's result) are read with --peer NAME.

    pip install -e '.[minatar]'
    python bench/minatar_learning.py jobs/minatar-breakout-dqn.toml --seeds 1-3 --steps 1000000
    python bench/minatar_learning.py jobs/minatar-vtrace.toml --games all --seeds 1-3 --parallel 1 \
        --keep runs/minatar [--peer peer-sb3-a2c-breakout] [--set vtrace.unroll_length=20]

The result (bench/results_format.py) goes to --out, by default results/JOB.json for the job as written and
results/JOB-CHANGES.json with --set or --steps; it is written again after each game. --eval keeps the job's
[eval] and prints its greedy means too; --keep DIR keeps the run directories (which `rlsup plot` draws);
--set TABLE.FIELD=VALUE changes the job.
Run again with the same --keep DIR, a bench goes on where it stopped: each kept run resumes from its newest
checkpoint (after a Ctrl-C, which pauses the runs, or with a larger --steps), and the wall times printed are
this call's.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import results_format  # bench/ beside this script
from learning_seeds import changed_job, parse_seeds
from minatar_paper import GAMES, game_of, marks_for, moving_average_at, paper_value, version_of

from rlsup.run import files as runfiles
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup import spec as specs
from rlsup.spec import experiments

DEFAULT_JOB = Path(__file__).parents[1] / "jobs" / "minatar-breakout-dqn.toml"


class BenchStopped(Exception):
    """A seed's run ended short of its budget: paused (a Ctrl-C reaches it too) or failed."""


@dataclass
class SeedRun:
    episodes: list[tuple[int, float]]  # (step, return) of every training episode
    evaluations: list[tuple[int, float]]  # (step, greedy mean) of every [eval] the job ran
    wall_s: float


def train(job: Path, game: str, env_id: str, seed: int, steps: int, directory: Path, evaluate: bool,
          linked: dict) -> SeedRun:
    """Every training episode and evaluation of one seed of one game, and its wall time."""
    base = specs.load(job)
    values = {"job.seed": seed, "job.total_steps": steps, "env.id": env_id, **linked}
    spec = experiments.variant_spec(base, experiments.PlannedJob(game, values))  # as submit makes it
    if not evaluate:
        spec = spec.replace("eval", every_steps=0)
    copy = directory / f"{game.lower()}-seed-{seed}.toml"
    copy.write_text(spec.to_toml())
    run_dir = directory / f"{game.lower()}-{seed}"
    # A run kept from an earlier call (paused, stopped, or given a smaller --steps) goes on from its newest
    # checkpoint with this copy as its spec; one already at its budget ends at once.
    where = ["--resume", str(run_dir)] if run_dir.exists() else ["--run-dir", str(run_dir)]
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(copy), *where],
                            capture_output=True, text=True)
    if result.returncode == EXIT_PAUSED:
        raise BenchStopped(f"{game} seed {seed} paused at step {read_exit(run_dir).step:,} with a checkpoint")
    if result.returncode != 0:
        raise BenchStopped(f"{game} seed {seed}: rlsup run exited {result.returncode}: {result.stderr.strip()}")
    records = runfiles.read_metrics(run_dir)
    return SeedRun(episodes=[(record["step"], record["return"]) for record in records
                             if record["kind"] == "episode"],
                   evaluations=[(record["step"], record["mean"]) for record in records if record["kind"] == "eval"],
                   wall_s=time.monotonic() - started)


# Points of a game's plotted curve (the mean over seeds of the paper's measure), evenly over the budget.
CURVE_POINTS = 50


def peer_results(names: list[str]) -> dict[str, dict]:
    """name -> a peer's result (bench/peers/sb3_minatar.py's), given as NAME (results/NAME.json) or a path."""
    peers = {}
    for name in names:
        path = Path(name) if name.endswith(".json") else results_format.RESULTS / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"--peer {name}: no {path}")
        peers[path.stem] = results_format.load_all(path.parent)[path.stem]
    return peers


def peer_value(peer: dict, game: str, frames: int) -> float | None:
    """A peer result's mean of the paper's measure for this game at these frames, where it has one."""
    for table in peer["tables"]:
        if table["group"] == game and table["measure"] == "training_mean_100":
            return next((mark["mean"] for mark in table["marks"] if mark["x"] == frames), None)
    return None


def training_table(game: str, env_id: str, results: dict[int, SeedRun], steps: int, linked: dict) -> dict:
    """The result's table of the paper's measure for one game: each seed's value at each mark, and a curve."""
    marks = [results_format.mark(frames, {seed: moving_average_at(run.episodes, frames) for seed, run in
                                          results.items()}) for frames in marks_for(game, steps)]
    curve = [[frames, value] for frames in range(steps // CURVE_POINTS, steps + 1, steps // CURVE_POINTS)
             if (value := mean([moving_average_at(run.episodes, frames) for run in results.values()])) is not None]
    return {"group": game, "env": env_id, "settings": linked, "measure": "training_mean_100", "marks": marks,
            "curve": curve}


def evaluation_table(game: str, env_id: str, results: dict[int, SeedRun], linked: dict) -> dict:
    """The job's greedy [eval] means per seed, at every step any seed evaluated."""
    steps = sorted({step for run in results.values() for step, _ in run.evaluations})
    return {"group": game, "env": env_id, "settings": linked, "measure": "greedy_eval",
            "marks": [results_format.mark(step, {seed: dict(run.evaluations).get(step)
                                                 for seed, run in results.items()}) for step in steps]}


def print_table(game: str, table: dict, results: dict[int, SeedRun], peers: dict[str, dict]) -> None:
    walls = ", ".join(f"{run.wall_s:.0f} s" for run in results.values())
    print(f"\n{game}: wall per seed {walls}" + "".join(f"; peer: {peer['learner']}" for peer in peers.values()))
    print(f"{'frames':>10}  {'paper DQN':>9}  {'paper AC':>8}  " + "".join(f"{'peer':>7}  " for _ in peers)
          + f"{'rlsup mean':>10}  per seed")
    for mark in table["marks"]:
        frames = mark["x"]
        print(f"{frames:>10,}  {text(paper_value(game, 'DQN', frames), 9)}  {text(paper_value(game, 'AC', frames), 8)}  "
              + "".join(f"{text(peer_value(peer, game, frames), 7)}  " for peer in peers.values())
              + f"{text(mark['mean'], 10, 2)}  " + " ".join(text(value, 0, 2) for value in mark["seeds"].values()))


def print_evaluations(table: dict) -> None:
    print(f"{'eval step':>10}  {'greedy mean':>11}  per seed")
    for mark in table["marks"]:
        print(f"{mark['x']:>10,}  {text(mark['mean'], 11, 2)}  "
              + " ".join(text(value, 0, 2) for value in mark["seeds"].values()))


def mean(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.fmean(known) if known else None


def text(value: float | None, width: int, digits: int = 1) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def parse_games(text_value: str | None, job: Path) -> list[str]:
    if text_value is None:
        return [game_of(specs.load(job).env.id)]
    games = list(GAMES) if text_value == "all" else text_value.split(",")
    unknown = [game for game in games if game not in GAMES]
    if unknown:
        raise SystemExit(f"--games: unknown {', '.join(unknown)} (known: {', '.join(GAMES)}, or all)")
    return games


def game_values(job: Path, game: str, settings: list[str]) -> dict:
    """What the job's [sweep] sets for this game (its id, and a linked entropy cost, say), as `rlsup submit`
    would; a --set of the same field wins."""
    given = {setting.partition("=")[0] for setting in settings}
    for variant in specs.sweep_of(job.read_text(), file=str(job)).variants():
        if game_of(variant.get("env.id", "")) == game:
            return {name: value for name, value in variant.items() if name not in given}
    return {}


def main() -> None:
    try:
        compare()
    except (BenchStopped, KeyboardInterrupt) as stopped:
        # The seeds' runs pause on the same Ctrl-C; kept ones go on when the command runs again.
        print(f"stopped: {stopped or 'interrupted'}; with --keep, the same command goes on from each run's "
              "newest checkpoint", file=sys.stderr)
        sys.exit(130 if isinstance(stopped, KeyboardInterrupt) else 1)


def compare() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", nargs="?", type=Path, default=DEFAULT_JOB)
    parser.add_argument("--games", default=None, help="comma-separated, or all (default: the job's game)")
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--steps", type=int, default=None, help="frames per seed (default: the job's budget)")
    parser.add_argument("--parallel", type=int, default=2, help="seeds trained side by side")
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.FIELD=VALUE")
    parser.add_argument("--eval", action="store_true",
                        help="keep the job's [eval] and print its greedy means (default: no evaluation)")
    parser.add_argument("--keep", type=Path, default=None,
                        help="put the run directories here and keep them (default: a temporary directory)")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME",
                        help="a peer's result to compare with: results/NAME.json (bench/peers/sb3_minatar.py's)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the result file (default: results/JOB.json, or results/JOB-CHANGES.json with "
                             "--set or --steps)")
    results_format.add_note_argument(parser)
    arguments = parser.parse_args()
    budget = specs.load(arguments.job).job.total_steps
    steps = arguments.steps or budget
    seeds, games, peers = parse_seeds(arguments.seeds), parse_games(arguments.games, arguments.job), \
        peer_results(arguments.peer)
    overrides = arguments.set + ([f"job.total_steps={steps}"] if steps != budget else [])
    out = arguments.out or results_format.default_out(arguments.job.stem, overrides)
    if arguments.keep is not None:
        arguments.keep.mkdir(parents=True, exist_ok=True)
    result = results_format.measured(
        f"{arguments.job.stem}: {', '.join(games)}, seeds {arguments.seeds}, {steps:,} frames", arguments.job,
        "rlsup", results_format.run_section("bench/minatar_learning.py", ["python", *sys.argv], arguments.job,
                                            overrides),
        seeds, [], [{"label": "MinAtar paper, DQN", "paper": "DQN"}, {"label": "MinAtar paper, AC(0.8)", "paper": "AC"}]
        + [{"label": peer["learner"], "result": name} for name, peer in peers.items()], note=arguments.note)
    with (nullcontext(str(arguments.keep)) if arguments.keep else tempfile.TemporaryDirectory(
            prefix="rlsup-minatar-")) as directory:
        job = changed_job(arguments.job, None, arguments.set, Path(directory))
        stopping = threading.Event()
        print(f"{arguments.job.name} {' '.join(arguments.set)}: seeds {arguments.seeds}, {steps:,} frames each")
        for game in games:
            linked = game_values(arguments.job, game, arguments.set)
            # The game's id in the [sweep] wins; else the job's action set (-v0 or -v1) for every game.
            env_id = linked.get("env.id", f"MinAtar/{game}-{version_of(specs.load(job).env.id)}")
            def train_seed(seed: int) -> SeedRun:
                # A seed that paused (a Ctrl-C) or failed stops the bench: the seeds queued behind it do not start.
                if stopping.is_set():
                    raise BenchStopped(f"{game} seed {seed} not started: the bench is stopping")
                try:
                    return train(job, game, env_id, seed, steps, Path(directory), arguments.eval, linked)
                except BenchStopped:
                    stopping.set()
                    raise

            with ThreadPoolExecutor(arguments.parallel) as pool:
                runs = dict(zip(seeds, pool.map(train_seed, seeds)))
            table = training_table(game, env_id, runs, steps, linked)
            print_table(game, table, runs, peers)
            result["tables"] += [table, {"group": game, "env": env_id, "settings": linked, "measure": "wall_s",
                                         "marks": [results_format.mark(None, {seed: run.wall_s for seed, run
                                                                              in runs.items()})]}]
            if arguments.eval:
                result["tables"].append(evaluation_table(game, env_id, runs, linked))
                print_evaluations(result["tables"][-1])
            results_format.write(out, result)
            print(f"result: {out}")


if __name__ == "__main__":
    main()
