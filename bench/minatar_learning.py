"""MinAtar over games and seeds: training return against frames, beside the MinAtar paper's curves and a peer's.

Each seed is a whole `rlsup run` process on a copy of the job file with [job] seed and total_steps (and,
with --games, [env] id) changed. The figure compared is the paper's: the mean return of the last 100
training episodes (as the agent trains: epsilon-greedy for DQN, sampled from the policy for V-trace), at
the same number of frames (one frame = one agent step in MinAtar). V-trace's episodes count at the learner
step that received them, up to one round of unrolls after they ended. The paper's values are in
bench/minatar_paper.py; a peer's runs (bench/peers/sb3_minatar.py --out FILE) are read with --peer FILE.

    pip install -e '.[minatar]'
    python bench/minatar_learning.py jobs/minatar-breakout-dqn.toml --seeds 1-3 --steps 1000000
    python bench/minatar_learning.py jobs/minatar-vtrace.toml --games all --seeds 1-3 --parallel 1 \
        --keep runs/minatar --json minatar.json [--peer a2c-breakout.json] [--set vtrace.unroll_length=20]

--eval keeps the job's [eval] and prints its greedy means too; --keep DIR keeps the run directories (which
`rlsup plot` draws); --json FILE writes every table's numbers; --set TABLE.FIELD=VALUE changes the job.
Run again with the same --keep DIR, a bench goes on where it stopped: each kept run resumes from its newest
checkpoint (after a Ctrl-C, which pauses the runs, or with a larger --steps), and the wall times printed are
this call's.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from learning_seeds import changed_job, parse_seeds  # bench/ beside this script
from minatar_paper import BREAKOUT_EARLY, GAMES, MARKS, game_of, paper_value, version_of

from rlsup.run import files as runfiles
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup import spec as specs
from rlsup.spec import experiments

WINDOW = 100  # episodes in the paper's moving average
DEFAULT_JOB = Path(__file__).parents[1] / "jobs" / "minatar-breakout-dqn.toml"


class BenchStopped(Exception):
    """A seed's run ended short of its budget: paused (a Ctrl-C reaches it too) or failed."""


@dataclass
class SeedRun:
    episodes: list[tuple[int, float]]  # (step, return) of every training episode
    evaluations: list[tuple[int, float]]  # (step, greedy mean) of every [eval] the job ran
    wall_s: float


def train(job: Path, game: str, seed: int, steps: int, directory: Path, evaluate: bool,
          linked: dict | None = None) -> SeedRun:
    """Every training episode and evaluation of one seed of one game, and its wall time."""
    # The game's id in the [sweep] (in `linked`) wins; else the job's action set (-v0 or -v1) for every game.
    base = specs.load(job)
    env_id = f"MinAtar/{game}-{version_of(base.env.id)}"
    values = {"job.seed": seed, "job.total_steps": steps, "env.id": env_id, **(linked or {})}
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


def moving_average_at(episodes: list[tuple[int, float]], frames: int) -> float | None:
    """The mean return of the last WINDOW episodes that ended by frames."""
    ended = [episode_return for step, episode_return in episodes if step <= frames][-WINDOW:]
    return statistics.fmean(ended) if ended else None


def marks_for(game: str, steps: int) -> list[int]:
    """The frames the paper's figure gives values at, within the budget, and the budget itself."""
    early = sorted(BREAKOUT_EARLY["DQN"]) if game == "Breakout" else []
    marks = [mark for mark in (*early, *MARKS) if mark <= steps]
    return marks + ([steps] if steps not in marks else [])


def peer_curves(paths: list[Path]) -> dict[str, tuple[str, list[list[tuple[int, float]]]]]:
    """game -> (peer name, every seed's episodes), from bench/peers/sb3_minatar.py's JSON files."""
    curves = {}
    for path in paths:
        data = json.loads(path.read_text())
        seeds = [[(int(step), float(value)) for step, value in run["episodes"]] for run in data["seeds"].values()]
        curves[game_of(data["game"])] = (f"{data['peer']} (seeds {','.join(data['seeds'])})", seeds)
    return curves


def table(game: str, results: list[SeedRun], steps: int, peer: tuple | None) -> list[dict]:
    """One row per mark: the paper's two agents, the peer's mean and rlsup's mean and seeds."""
    rows = []
    for frames in marks_for(game, steps):
        values = [moving_average_at(result.episodes, frames) for result in results]
        peer_values = [moving_average_at(episodes, frames) for episodes in peer[1]] if peer else []
        rows.append({"frames": frames, "paper_dqn": paper_value(game, "DQN", frames),
                     "paper_ac": paper_value(game, "AC", frames), "peer": mean(peer_values),
                     "rlsup": mean(values), "seeds": values})
    return rows


def print_table(game: str, rows: list[dict], results: list[SeedRun], peer: tuple | None) -> None:
    walls = ", ".join(f"{result.wall_s:.0f} s" for result in results)
    print(f"\n{game}: wall per seed {walls}" + (f"; peer: {peer[0]}" if peer else ""))
    print(f"{'frames':>10}  {'paper DQN':>9}  {'paper AC':>8}  {'peer':>7}  {'rlsup mean':>10}  per seed")
    for row in rows:
        print(f"{row['frames']:>10,}  {text(row['paper_dqn'], 9)}  {text(row['paper_ac'], 8)}  "
              f"{text(row['peer'], 7)}  {text(row['rlsup'], 10, 2)}  "
              + " ".join(text(value, 0, 2) for value in row["seeds"]))


def print_evaluations(results: list[SeedRun]) -> None:
    """The job's greedy [eval] means per seed, at every step any seed evaluated."""
    print(f"{'eval step':>10}  {'greedy mean':>11}  per seed")
    for step in sorted({step for result in results for step, _ in result.evaluations}):
        values = [dict(result.evaluations).get(step) for result in results]
        print(f"{step:>10,}  {text(mean(values), 11, 2)}  " + " ".join(text(value, 0, 2) for value in values))


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
    parser.add_argument("--peer", type=Path, action="append", default=[], help="a sb3_minatar.py --out file")
    parser.add_argument("--json", type=Path, default=None, help="write the tables here")
    arguments = parser.parse_args()
    steps = arguments.steps or specs.load(arguments.job).job.total_steps
    seeds, games, peers = parse_seeds(arguments.seeds), parse_games(arguments.games, arguments.job), \
        peer_curves(arguments.peer)
    if arguments.keep is not None:
        arguments.keep.mkdir(parents=True, exist_ok=True)
    output = {"job": str(arguments.job), "set": arguments.set, "steps": steps, "seeds": seeds,
              "machine": f"{platform.machine()}, {platform.node()}", "games": {}}
    with (nullcontext(str(arguments.keep)) if arguments.keep else tempfile.TemporaryDirectory(
            prefix="rlsup-minatar-")) as directory:
        job = changed_job(arguments.job, None, arguments.set, Path(directory))
        print(f"{arguments.job.name} {' '.join(arguments.set)}: seeds {arguments.seeds}, {steps:,} frames each")
        for game in games:
            linked = game_values(arguments.job, game, arguments.set)
            with ThreadPoolExecutor(arguments.parallel) as pool:
                results = list(pool.map(lambda seed: train(job, game, seed, steps, Path(directory),
                                                           arguments.eval, linked), seeds))
            rows = table(game, results, steps, peers.get(game))
            print_table(game, rows, results, peers.get(game))
            if arguments.eval:
                print_evaluations(results)
            output["games"][game] = {"rows": rows, "sweep": linked, "wall_s": [result.wall_s for result in results]}
            if arguments.json:
                arguments.json.write_text(json.dumps(output, indent=1))


if __name__ == "__main__":
    main()
