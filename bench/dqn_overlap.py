"""DQN with and without `[dqn] overlap`, in one process: steps/s, and who waits for whom per gradient step.

Both runs build the job's trainer and train it past learning_starts untimed (filling the replay is not
what overlap changes), then time the same number of steps. For the overlapped run it prints how long
the learner's rounds ran per gradient step, how long the envs then waited for them, and how long
the learner sat idle: with a learner that is never idle, the envs' side is what is left to hide.

    python bench/dqn_overlap.py jobs/minatar-breakout-dqn.toml --steps 10000

The result (bench/results_format.py) goes to --out, by default results/dqn-overlap-JOB.json.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from rlsup.algos.device import configure_torch, select_device
from rlsup.algos.dqn import DqnTrainer
from rlsup.algos.overlap import LearnerThread
from rlsup.spec import loading

import results_format  # bench/ beside this script


def timed_run(spec, steps: int, *, on_thread: bool = False) -> dict[str, float]:
    device = select_device(spec.job.device)
    trainer = DqnTrainer(spec, device)
    if on_thread:
        trainer.learner_rounds = LearnerThread(trainer.learner, device)
    try:
        while trainer.step < spec.dqn.learning_starts + spec.env.num_envs:
            trainer.iterate()
        thread = trainer.learner_rounds
        began, first_step, first_updates = time.perf_counter(), trainer.step, trainer.learner.updates
        round_before, waited_before = thread.round_seconds, thread.waited_seconds
        while trainer.step < first_step + steps:
            trainer.iterate()
        trainer.fingerprint()  # waits for a round still running: its gradient steps are counted
        elapsed = time.perf_counter() - began
        updates = max(1, trainer.learner.updates - first_updates)
        return {"steps_per_second": (trainer.step - first_step) / elapsed, "ms_per_update": 1000 * elapsed / updates,
                "round_ms": 1000 * (thread.round_seconds - round_before) / updates,
                "waited_ms": 1000 * (thread.waited_seconds - waited_before) / updates}
    finally:
        trainer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job")
    parser.add_argument("--steps", type=int, default=10_000, help="timed steps after learning starts")
    parser.add_argument("--learning-starts", type=int, default=None, help="overrides the job's")
    results_format.add_out_argument(parser, "results/dqn-overlap-JOB.json")
    arguments = parser.parse_args()
    overrides = [] if arguments.learning_starts is None else [f"dqn.learning_starts={arguments.learning_starts}"]
    run = results_format.started("bench/dqn_overlap.py", Path(arguments.job), overrides)
    spec = loading.load(arguments.job)
    if arguments.learning_starts is not None:
        spec = spec.replace("dqn", learning_starts=arguments.learning_starts)
    configure_torch(spec)
    plain = timed_run(spec.replace("dqn", overlap=False), arguments.steps)
    overlapped = timed_run(spec.replace("dqn", overlap=True), arguments.steps)
    threaded = timed_run(spec.replace("dqn", overlap=True), arguments.steps, on_thread=True)
    print(f"{spec.env.id}, {spec.env.num_envs} env(s), a round of {spec.dqn.gradient_steps} gradient step(s) "
          f"every {spec.dqn.train_every} steps, batch {spec.dqn.batch_size}, {spec.job.threads} torch thread(s), "
          f"device {spec.job.device}; {arguments.steps} steps timed after learning starts")
    print(f"{'':10}{'steps/s':>9}{'ms/update':>11}{'learner busy':>14}{'envs waited':>13}{'learner idle':>14}")
    print(f"{'plain':10}{plain['steps_per_second']:>9.0f}{plain['ms_per_update']:>11.2f}")
    for name, figures in (("process", overlapped), ("thread", threaded)):
        idle = figures["ms_per_update"] - figures["round_ms"]
        print(f"{name:10}{figures['steps_per_second']:>9.0f}{figures['ms_per_update']:>11.2f}"
              f"{figures['round_ms']:>14.2f}{figures['waited_ms']:>13.2f}{idle:>14.2f}")
    print(f"overlap / plain: {overlapped['steps_per_second'] / plain['steps_per_second']:.2f}x the steps/s with the "
          f"learner in a process (what a CPU job runs), {threaded['steps_per_second'] / plain['steps_per_second']:.2f}x "
          "on a thread (learner busy, envs waited and learner idle are ms per gradient step)")
    write_result(arguments, run, spec, {"plain": plain, "learner process": overlapped, "learner thread": threaded})
    return 0


def write_result(arguments: argparse.Namespace, run: dict, spec, sides: dict[str, dict]) -> None:
    column = results_format.column
    columns = [column("steps/s", "steps/s", 0), column("per gradient step", "ms", 2),
               column("learner busy a gradient step", "ms", 2), column("envs waited a gradient step", "ms", 2),
               column("learner idle a gradient step", "ms", 2), column("steps/s against plain", "x", 2)]
    plain = sides["plain"]["steps_per_second"]
    rows = {name: [figures["steps_per_second"], figures["ms_per_update"],
                   *([figures["round_ms"], figures["waited_ms"], figures["ms_per_update"] - figures["round_ms"]]
                     if name != "plain" else [None, None, None]), figures["steps_per_second"] / plain]
            for name, figures in sides.items()}
    said = (f"{spec.env.num_envs} env(s), a round of {spec.dqn.gradient_steps} gradient step(s) every "
            f"{spec.dqn.train_every} steps, batch {spec.dqn.batch_size}, {spec.job.threads} torch thread(s), device "
            f"{spec.job.device}; {arguments.steps:,} steps timed after learning starts, each side in this process.")
    table = results_format.measurement(spec.env.id, "side", columns, rows, said)
    finding = (f"With [dqn] overlap the job made {rows['learner process'][-1]:.2f}x plain's steps/s with its learner in "
               f"a process (what a CPU job runs) and {rows['learner thread'][-1]:.2f}x on a thread.")
    job = Path(arguments.job)
    name = results_format.default_out(f"dqn-overlap-{job.stem}", run["overrides"]).stem
    results_format.write_figures(arguments, run, name, f"DQN steps/s with [dqn] overlap against without: {job.name}",
                                 [table], finding, job, [spec.job.seed])


if __name__ == "__main__":
    sys.exit(main())
