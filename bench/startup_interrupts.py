"""Ctrl-C at random moments of `rlsup run`'s start-up, many times over: how each run ended, counted.

    flock /tmp/rlsup-heavy.lock nice -n 5 python bench/startup_interrupts.py --seconds 180

Each round starts a foreground CartPole run, sends one SIGINT after a random delay, and waits. A single
Ctrl-C must always end the run with one sentence and a documented code: a lost signal (the run trains on
until a second one), a traceback, or a crash (a negative code, `Fatal Python error`) is a fault; their
stderr is kept under the printed directory, with faulthandler's C-level stacks where a signal killed it.

The result (bench/results_format.py) goes to --out, by default results/startup-interrupts.json.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import results_format  # bench/ beside this script

JOB = """
[job]
seed = 7
total_steps = 1_000_000
device = "cpu"
threads = 1

[env]
id = "CartPole-v1"

[dqn]
batch_size = 32
learning_starts = 200
hidden_sizes = [32, 32]

[[replay]]
capacity = 5_000

[checkpoint]
every_steps = 0
"""
# How long one SIGINT may take to end a run before it counts as lost (a pause writes a checkpoint first).
LOST_AFTER_S = 60.0
FAULTS = ("lost", "traceback", "crash")


def classify(returncode: int, stderr: str, lost: bool) -> str:
    """One word for how a run ended; FAULTS are the ones a single Ctrl-C must never give."""
    if lost:
        return "lost"
    if returncode == -signal.SIGINT or stderr.startswith("Fatal Python error: init_import_site"):
        # Before rlsup's first line: ended as any program is (rlsup itself never ends by SIGINT).
        return "before rlsup's first line"
    if "Fatal Python error" in stderr or returncode < 0:
        return "crash"
    if "Traceback" in stderr:
        return "traceback"
    return {75: "paused (75)", 130: "interrupted (130)"}.get(returncode, f"exit {returncode}")


def one_round(job: Path, run_dir: Path, delay_s: float, environment: dict[str, str]) -> tuple[str, str]:
    command = [sys.executable, "-X", "faulthandler", "-m", "rlsup.cli", "run", str(job), "--run-dir", str(run_dir)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment)
    time.sleep(delay_s)
    process.send_signal(signal.SIGINT)
    lost = False
    try:
        _, stderr = process.communicate(timeout=LOST_AFTER_S)
    except subprocess.TimeoutExpired:
        lost = True
        process.send_signal(signal.SIGINT)
        try:
            _, stderr = process.communicate(timeout=LOST_AFTER_S)
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
    return classify(process.returncode, stderr, lost), stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="stop starting rounds after this long")
    parser.add_argument("--runs", type=int, default=1_000_000, help="or after this many rounds")
    parser.add_argument("--max-delay", type=float, default=1.5, help="delays are uniform in [0, this] seconds")
    parser.add_argument("--seed", type=int, default=0)
    results_format.add_out_argument(parser, "results/startup-interrupts.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/startup_interrupts.py")
    # Children start with SIGINT at its default, as a terminal's foreground job does, even when this bench
    # runs as a script's background job (which ignores SIGINT, as its children then would, until their first line).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    chooser = random.Random(arguments.seed)
    directory = Path(tempfile.mkdtemp(prefix="rlsup-startup-interrupts-"))
    job = directory / "cartpole.toml"
    job.write_text(JOB)
    environment = {**os.environ, "RLSUP_HOME": str(directory / "home"), "PYTHONFAULTHANDLER": "1"}
    counts: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    round_number = 0
    while round_number < arguments.runs and time.monotonic() - started < arguments.seconds:
        delay_s = chooser.uniform(0.0, arguments.max_delay)
        outcome, stderr = one_round(job, directory / f"run-{round_number}", delay_s, environment)
        counts[outcome] += 1
        if outcome in FAULTS:
            (directory / f"fault-{round_number}-{outcome}.txt").write_text(f"delay {delay_s:.3f} s\n{stderr}")
        round_number += 1
    faults = sum(counts[name] for name in FAULTS)
    print(f"{round_number} runs, {faults} faults; kept in {directory}")
    for outcome, count in counts.most_common():
        print(f"  {count:5d}  {outcome}")
    table = results_format.measurement(
        "How each run ended", "outcome", [results_format.column("runs", "count"), results_format.column("a fault")],
        {outcome: [count, "yes" if outcome in FAULTS else "no"] for outcome, count in counts.most_common()},
        f"One SIGINT at a delay uniform in [0, {arguments.max_delay:g}] s of a foreground CartPole run's start, "
        f"{round_number} rounds (seed {arguments.seed}).")
    results_format.write_figures(arguments, run, "startup-interrupts", "Ctrl-C at random moments of `rlsup run`'s "
                                 "start-up", [table], f"{faults} faults in {round_number} runs.")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
