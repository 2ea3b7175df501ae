"""What would make a job's DQN update faster if its arithmetic may change: more torch threads, or torch.compile.

Issue 27 asks for MinAtar DQN at twice today's speed; with the same bits the update is the floor (bench/
dqn_profile.py). This bench times the job's own learner (DqnLearner, its network and fused Adam) on batches drawn
from its filled replay, in each variant in a process of its own (threads and compiled code are per process),
interleaved over rounds, and prints the median ms per update and its ratio to today's (eager, the job's threads).

    python bench/dqn_update_variants.py jobs/minatar-breakout-dqn.toml [--updates 500] [--rounds 3]

The result (bench/results_format.py) goes to --out, by default results/dqn-update-variants-JOB.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import results_format  # bench/ beside this script

VARIANTS = {"eager": "today's update", "eager-2-threads": "torch.set_num_threads(2)",
            "compiled": "torch.compile of the online and target networks (inductor, CPU)"}


def measure(job: Path, variant: str, updates: int) -> dict:
    """In this process: fill the job's replay, then time `updates` gradient steps on pre-drawn batches."""
    import torch

    from rlsup.algos.device import configure_torch, select_device
    from rlsup.algos.dqn import DqnTrainer
    from rlsup.spec import loading

    spec = loading.load(job)
    configure_torch(spec)
    if variant == "eager-2-threads":
        torch.set_num_threads(2)
    trainer = DqnTrainer(spec.replace("dqn", learning_starts=10**9), select_device(spec.job.device))
    try:
        while trainer.step < spec.dqn.learning_starts:
            trainer.iterate()  # acting only: the replay as the first update finds it
        batches = [trainer._sample(trainer.step) for _ in range(updates)]
        learner = trainer.learner
        if variant == "compiled":
            learner.online, learner.target = torch.compile(learner.online), torch.compile(learner.target)
        began = time.perf_counter()
        for batch in batches[:20]:  # warm-up (and, compiled, the compilation)
            learner.update(batch, trainer.step)
        compile_seconds = time.perf_counter() - began
        began = time.perf_counter()
        for batch in batches:
            learner.update(batch, trainer.step)
        return {"ms": 1e3 * (time.perf_counter() - began) / updates, "first_20_s": compile_seconds}
    finally:
        trainer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", type=Path)
    parser.add_argument("--updates", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variant", choices=list(VARIANTS), help=argparse.SUPPRESS)  # one measurement, as JSON
    results_format.add_out_argument(parser, "results/dqn-update-variants-JOB.json")
    arguments = parser.parse_args()
    if arguments.variant:
        print(json.dumps(measure(arguments.job, arguments.variant, arguments.updates)))
        return 0
    run = results_format.started("bench/dqn_update_variants.py", arguments.job)
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    first: dict[str, float] = {}
    for _ in range(arguments.rounds):
        for variant in VARIANTS:
            result = subprocess.run([sys.executable, __file__, str(arguments.job), "--variant", variant,
                                     "--updates", str(arguments.updates)], capture_output=True, text=True)
            if result.returncode != 0:
                print(f"{variant} failed: {result.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                return 1
            measured = json.loads(result.stdout.strip().splitlines()[-1])
            times[variant].append(measured["ms"])
            first[variant] = measured["first_20_s"]
    today = statistics.median(times["eager"])
    print(f"{arguments.job}: {arguments.updates} updates a round, {arguments.rounds} rounds, medians")
    print(f"{'variant':18}{'ms/update':>10}{'vs today':>10}{'first 20 (s)':>14}  what")
    rows = {}
    for variant, what in VARIANTS.items():
        median = statistics.median(times[variant])
        print(f"{variant:18}{median:>10.2f}{today / median:>9.2f}x{first[variant]:>14.1f}  {what}")
        rows[f"{variant}: {what}"] = [median, today / median, first[variant]]
    write_result(arguments, run, rows)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, rows: dict[str, list]) -> None:
    column = results_format.column
    table = results_format.measurement(
        "Median time per update, each variant in a process of its own", "variant",
        [column("per update", "ms", 2), column("today's / this", "x", 2), column("the first 20 updates", "s", 1)],
        rows, f"{arguments.updates} updates a round, {arguments.rounds} rounds, medians; the first 20 updates (and, "
        "compiled, the compilation) are a warm-up, not timed.")
    ratios = {name.split(":")[0]: values[1] for name, values in rows.items() if not name.startswith("eager:")}
    finding = "Against today's update: " + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items()) + "."
    results_format.write_figures(arguments, run, f"dqn-update-variants-{arguments.job.stem}",
                                 f"The DQN update of {arguments.job.name} with more threads or torch.compile", [table],
                                 finding, arguments.job)


if __name__ == "__main__":
    sys.exit(main())
