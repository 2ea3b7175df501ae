"""What leaving without torch's teardown saves a command: whole `rlsup enjoy` and `export` processes, side by side.

Each command runs twice per round, alternating: as the program (`python -m rlsup.cli`, which ends through
run/exit.py's end_process) and through the same run_command() in a process that then exits as any Python
program does, tearing torch's modules down. Both do the same work; only their end differs.

    python bench/process_exit.py [--rounds 5]

The result (bench/results_format.py) goes to --out, by default results/process-exit.json.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results_format  # bench/ beside this script

JOB = """
[job]
seed = 1
total_steps = 300
threads = 1

[env]
id = "CartPole-v1"

[dqn]
learning_starts = 100
hidden_sizes = [32, 32]

[[replay]]
capacity = 1_000
"""
WITH_TEARDOWN = "import sys; from rlsup.cli.parser import run_command; sys.exit(run_command(sys.argv[1:]))"


def timed(command: list[str], environment: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process."""
    before, started = os.times(), time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    after = os.times()
    return time.perf_counter() - started, (after.children_user - before.children_user
                                           + after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    results_format.add_out_argument(parser, "results/process-exit.json")
    arguments = parser.parse_args()
    rounds, run, rows = arguments.rounds, results_format.started("bench/process_exit.py"), {}
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        environment = {**os.environ, "RLSUP_HOME": str(home / "home")}
        (home / "job.toml").write_text(JOB)
        run_dir = home / "run"
        subprocess.run([sys.executable, "-m", "rlsup.cli", "run", str(home / "job.toml"), "--run-dir", str(run_dir)],
                       check=True, capture_output=True, env=environment)
        commands = {"enjoy": ["enjoy", str(run_dir), "--episodes", "1", "--json"],
                    "export": ["export", str(run_dir), "--format", "torchscript", "--out", str(home / "p.pt")]}
        print(f"{'command':8} {'teardown wall s':>16} {'end_process wall s':>19} {'ratio':>6} "
              f"{'teardown CPU s':>15} {'end_process CPU s':>18}")
        for name, arguments in commands.items():
            timings = {"program": [], "teardown": []}
            for _ in range(rounds):
                timings["program"].append(timed([sys.executable, "-m", "rlsup.cli", *arguments], environment))
                timings["teardown"].append(timed([sys.executable, "-c", WITH_TEARDOWN, *arguments], environment))
            wall = {kind: statistics.median(time for time, _ in runs) for kind, runs in timings.items()}
            cpu = {kind: statistics.median(used for _, used in runs) for kind, runs in timings.items()}
            print(f"{name:8} {wall['teardown']:16.2f} {wall['program']:19.2f} {wall['teardown'] / wall['program']:6.2f} "
                  f"{cpu['teardown']:15.2f} {cpu['program']:18.2f}")
            rows[f"rlsup {name}"] = [wall["teardown"], wall["program"], wall["teardown"] / wall["program"],
                                     cpu["teardown"], cpu["program"]]
    write_result(arguments, run, rows)


def write_result(arguments: argparse.Namespace, run: dict, rows: dict[str, list]) -> None:
    column = results_format.column
    columns = [column("with the teardown", "s", 2), column("without it, by end_process", "s", 2),
               column("with / without", "x", 2), column("CPU with the teardown", "CPU s", 2),
               column("CPU without it", "CPU s", 2)]
    table = results_format.measurement(
        "Whole processes, medians", "command", columns, rows,
        f"{arguments.rounds} rounds, the two ends alternating; enjoy plays one CartPole episode of a 300-step run.")
    finding = "Leaving without torch's teardown ended " + ", ".join(
        f"{name} {values[2]:.2f}x sooner" for name, values in rows.items()) + "."
    results_format.write_figures(arguments, run, "process-exit", "What leaving without torch's teardown saves "
                                 "`rlsup enjoy` and `rlsup export`", [table], finding)


if __name__ == "__main__":
    main()
