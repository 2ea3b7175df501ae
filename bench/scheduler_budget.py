"""Successive halving and PBT against the full grid, on CartPole DQN: steps spent, wall time, best final evaluation.

One grid of 9 learning rates x 2 seeds, trained three ways by a real daemon in a private RLSUP_HOME, one way after
another so that each has the machine to itself: every member to the end (the full grid); ASHA (rungs at a
ninth and a third of the budget, the top third promoted); and PBT (every fifth of the budget the bottom quarter
forks the top with lr x 0.8 or 1.25; its forks train the steps the members they replace would have).

    python bench/scheduler_budget.py [--steps 50000] [--cpu-jobs 2] [--json FILE] [--out RESULT.json]
        [--ways asha,pbt --grid-from EARLIER.json] [--rungs 5000,15000]

The figure compared is the final evaluation at the budget ([eval]: 10 greedy episodes): for the grid,
a variant's mean over its 2 seeds, the best variant's is the grid's best; for ASHA, the variant its best
finished member has, judged both by what ASHA trained and by the grid's mean for it (is it a good variant?);
for PBT, its best finished member's (a PBT member is a lineage, not a variant).
The result (bench/results_format.py) goes to --out, by default results/scheduler-budget.json, or
results/scheduler-budget-WAYS.json for fewer ways; --json keeps every figure in this bench's own form.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results_format  # bench/ beside this script
from rlsup import client, paths
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.run import files as runfiles
from rlsup.run.lineage import read_parent
from rlsup.views.groups import evaluations

JOB = Path(__file__).parents[1] / "jobs" / "cartpole-dqn.toml"
LEARNING_RATES = (1e-4, 2e-4, 4e-4, 7e-4, 1e-3, 1.5e-3, 2.3e-3, 4e-3, 7e-3)
SEEDS = "1-2"
WAYS = ("grid", "asha", "pbt")
WAY_TITLES = {"grid": "the full grid", "asha": "ASHA", "pbt": "PBT"}


def scheduler_table(way: str, steps: int, rungs: tuple[int, ...], metric: str = "eval_return") -> str:
    if way == "asha":
        return (f'\n[scheduler]\nkind = "asha"\nmetric = "{metric}"\nrungs = {list(rungs)}\n'
                "keep = 0.34\n")
    if way == "pbt":
        return (f'\n[scheduler]\nkind = "pbt"\nmetric = "eval_return"\ninterval = {steps // 5}\nquantile = 0.25\n'
                'perturb = { "dqn.lr" = [0.8, 1.25] }\n')
    return ""


def job_file(directory: Path, way: str, steps: int, rungs: tuple[int, ...], metric: str) -> Path:
    """The example job at the budget, its lr swept, with the way's [scheduler]."""
    text = JOB.read_text().replace("total_steps = 50_000", f"total_steps = {steps}")
    # An evaluation every tenth of the budget (the example's 5,000 of 50,000), so one falls on the last step.
    text = text.replace("[eval]\nevery_steps = 5_000", f"[eval]\nevery_steps = {steps // 10}")
    text += f'\n[sweep]\n"dqn.lr" = [{", ".join(repr(lr) for lr in LEARNING_RATES)}]\n'
    text += scheduler_table(way, steps, rungs, metric)
    path = directory / f"{way}.toml"
    path.write_text(text)
    return path


def settled(home: Path, experiment: str) -> list | None:
    """The experiment's jobs once each is done, stopped or replaced; None while any trains or waits."""
    with Store(home) as store:
        jobs = store.experiment_jobs(experiment)
    if any(job.state is State.FAILED for job in jobs):
        raise SystemExit(f"a member of {experiment} failed: "
                         + next(job.reason for job in jobs if job.state is State.FAILED).splitlines()[0])
    over = all(job.state is State.DONE or (job.state is State.PAUSED and ("stopped by ASHA" in job.reason
                                                                           or job.reason.startswith("replaced at")))
               for job in jobs)
    return jobs if jobs and over else None


def train(home: Path, directory: Path, way: str, steps: int, rungs: tuple[int, ...],
          metric: str) -> tuple[list, float]:
    """Submit the way's experiment and wait for it: its jobs, and the wall time from submit to the last end."""
    environment = {**os.environ, "RLSUP_HOME": str(home)}
    start = time.monotonic()
    job = job_file(directory, way, steps, rungs, metric)
    subprocess.run([sys.executable, "-m", "rlsup.cli", "submit", str(job), "--seeds", SEEDS, "--experiment", way],
                   env=environment, check=True, stdout=subprocess.DEVNULL)
    while (jobs := settled(home, way)) is None:
        time.sleep(2.0)
    return jobs, time.monotonic() - start


def summary(jobs: list, steps: int, grid: dict[float, float] | None) -> dict:
    """Steps spent, and the final evaluations of the members that reached the budget."""
    spent, finals = 0, []
    for job in jobs:
        parent = read_parent(Path(job.run_dir))
        spent += job.step - (parent.step if parent else 0)
        if job.state is State.DONE:
            lr = runfiles.read_run_spec(Path(job.run_dir)).dqn.lr
            finals.append((evaluations(job.run_dir)[-1], lr, runfiles.read_run_spec(Path(job.run_dir)).job.seed))
    by_lr: dict[float, list[float]] = {}
    for value, lr, _ in finals:
        by_lr.setdefault(lr, []).append(value)
    best_value, best_lr, _ = max(finals)
    result = {"members": len(jobs), "finished": len(finals), "steps": spent,
              "grid_steps": len(LEARNING_RATES) * 2 * steps,
              "best_member": best_value, "best_member_lr": best_lr,
              "variants": {repr(lr): statistics.fmean(values) for lr, values in by_lr.items()}}
    if grid is not None:
        result["best_member_lr_in_grid"] = grid.get(best_lr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="each member's budget (the example's: 50,000)")
    parser.add_argument("--cpu-jobs", type=int, default=2, help="jobs the daemon runs at once")
    parser.add_argument("--json", metavar="FILE", help="write every figure")
    parser.add_argument("--ways", default=",".join(WAYS), help="which of grid, asha, pbt to train")
    parser.add_argument("--grid-from", metavar="FILE", type=Path, help="take the grid's figures from an earlier --json")
    parser.add_argument("--rungs", help="ASHA's rungs in steps, comma-separated (default: a ninth and a third)")
    parser.add_argument("--metric", default="eval_return", help="ASHA's: eval_return (default) or return")
    results_format.add_out_argument(parser, "results/scheduler-budget[-WAYS].json")
    args = parser.parse_args()
    run = results_format.started("bench/scheduler_budget.py")
    rungs = (tuple(int(rung) for rung in args.rungs.split(",")) if args.rungs
             else (args.steps // 9, args.steps // 3))
    home = Path(tempfile.mkdtemp(prefix="rlsup-scheduler-bench-"))
    directory = home / "jobs"
    directory.mkdir()
    (home / paths.DAEMON_SETTINGS).write_text(f"cpu_jobs = {args.cpu_jobs}\n")
    client.ensure_daemon(home)
    results, grid = {}, None
    if args.grid_from:
        results["grid"] = json.loads(args.grid_from.read_text())["grid"]
        grid = {float(lr): value for lr, value in results["grid"]["variants"].items()}
    try:
        for way in args.ways.split(","):
            jobs, wall = train(home, directory, way, args.steps, rungs, args.metric)
            results[way] = {**summary(jobs, args.steps, grid), "wall_s": round(wall, 1)}
            if way == "grid":
                grid = {float(lr): value for lr, value in results[way]["variants"].items()}
            print_way(way, results[way])
    finally:
        client.stop_daemon(home)
    results["machine"] = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                          "cpu_jobs": args.cpu_jobs, "steps": args.steps, "rungs": rungs, "metric": args.metric,
                          "home": str(home)}
    print_verdicts(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    write_result(args, run, results, rungs)
    return 0


def way_name(way: str, steps: int, rungs: tuple[int, ...], metric: str) -> str:
    if way == "asha":
        return f"ASHA, {metric}, rungs {' / '.join(f'{rung:,}' for rung in rungs)}"
    return f"PBT, every {steps // 5:,} steps, bottom 25% forks the top, lr x 0.8 or 1.25" if way == "pbt" else "full grid"


def write_result(args: argparse.Namespace, run: dict, results: dict, rungs: tuple[int, ...]) -> None:
    """Each way's steps, wall time and best finished member, judged by the grid's mean for its lr."""
    grid = {float(lr): value for lr, value in results["grid"]["variants"].items()} if "grid" in results else {}
    best = max(grid.values(), default=None)
    rows, notes = {}, {}
    for way in (way for way in WAYS if way in results):
        result = results[way]
        found = grid.get(result["best_member_lr"]) if way != "pbt" else None
        name = way_name(way, args.steps, rungs, args.metric)
        rows[name] = [result["steps"], 100 * result["steps"] / result["grid_steps"], result.get("wall_s"),
                      result["best_member"], None if way == "pbt" else f"{result['best_member_lr']:g}", found,
                      100 * found / best if found is not None and best else None]
        if way == "grid" and args.grid_from:
            notes[name] = f"from --grid-from {args.grid_from}, not this run"
    columns = [results_format.column("steps", "steps"), results_format.column("of the grid's steps", "%", 0),
               results_format.column("wall", "s", 1),
               results_format.column("best finished member's final evaluation", "return", 1),
               results_format.column("its lr"), results_format.column("that lr's mean in the grid", "return", 1),
               results_format.column("of the grid's best variant", "%", 0)]
    settings = {"based on": "jobs/cartpole-dqn.toml", "job.total_steps": args.steps, "sweep dqn.lr":
                ", ".join(f"{lr:g}" for lr in LEARNING_RATES), "seeds": SEEDS, "cpu_jobs": args.cpu_jobs}
    table = results_format.measurement(
        "Each way", "way", columns, rows, "The figure is the final evaluation ([eval]: 10 greedy episodes at the "
        "budget); a variant's is the mean of its two seeds. Each way had the machine to itself.", settings, notes)
    ways = [way for way in WAYS if way in args.ways.split(",")]
    name = "scheduler-budget" + ("" if ways == list(WAYS) else "-" + "-".join(ways))
    words = [WAY_TITLES[way] for way in ways]
    title = (", ".join(words[:-1]) + " and " if len(words) > 1 else "") + words[-1] \
        + f" on CartPole DQN, {len(LEARNING_RATES)} learning rates x 2 seeds"
    title = title[0].upper() + title[1:]
    results_format.write_figures(args, run, name, title, [table], finding(rows), seeds=[1, 2])


def finding(rows: dict[str, list]) -> str:
    """Each deciding way's share of the grid's steps and how good a variant it found."""
    said = [f"{name.split(',')[0]} spent {values[1]:.0f}% of the grid's steps and found "
            + (f"a variant at {values[6]:.0f}% of the grid's best" if values[6] is not None
               else f"a best member at {values[3]:.1f}") for name, values in rows.items() if name != "full grid"]
    return "; ".join(said) + "." if said else "The full grid alone: the figures the deciding ways are judged by."


def print_way(way: str, result: dict) -> None:
    best_grid = max(result["variants"].values())
    print(f"{way:5} {result['steps']:>9,} steps ({result['steps'] / result['grid_steps']:.0%} of the grid's)  "
          f"{result['wall_s']:>7.1f} s  best member {result['best_member']:.1f} (lr {result['best_member_lr']:g})  "
          f"best variant mean over its finished seeds {best_grid:.1f}"
          + (f"  that lr in the grid: {result['best_member_lr_in_grid']:.1f}"
             if result.get("best_member_lr_in_grid") is not None else ""), flush=True)


def print_verdicts(results: dict) -> None:
    if "grid" not in results:  # --ways without grid or --grid-from: each way's own line above is all there is
        return
    grid_best = max(results["grid"]["variants"].values())
    asha, pbt = results.get("asha"), results.get("pbt")
    if asha:
        found = asha["best_member_lr_in_grid"]
        print(f"\nASHA: its variant scores {found:.1f} in the grid, {found / grid_best:.0%} of the grid's best "
              f"{grid_best:.1f} (goal: >= 95%), for {asha['steps'] / asha['grid_steps']:.0%} of its steps "
              "(goal: <= 33%)")
    if pbt:
        print(f"PBT: best member {pbt['best_member']:.1f} against the grid's best {grid_best:.1f} (goal: >=), for "
              f"{pbt['steps'] / pbt['grid_steps']:.0%} of the grid's steps")


if __name__ == "__main__":
    sys.exit(main())
