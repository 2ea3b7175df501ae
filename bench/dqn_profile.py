"""Where one DQN env step goes: a job's trainer under cProfile, in µs per env step, by part and by function.

It builds the job's trainer in this process, trains it untimed past learning_starts and for --warm-up more
steps (so that Adam's moments and the replay are as a long run has them), then profiles --steps steps of
`iterate`. The parts are the trainer's own functions, so they sum to the step less its glue; cProfile
adds a few µs to every Python call it sees, so read the parts against each other, not as wall time.

    python bench/dqn_profile.py jobs/minatar-dqn.toml --steps 4000 [--set job.flush_denormals=true]

The result (bench/results_format.py) goes to --out, by default results/dqn-profile-JOB[-CHANGES].json.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

from rlsup.algos.device import configure_torch, select_device
from rlsup.algos.dqn import DqnTrainer
from rlsup.spec import loading

import results_format  # bench/ beside this script
from learning_seeds import changed_job

# (label, file suffix, function name): the parts of a step, outermost first.
PARTS = (
    ("a whole step (iterate)", "algos/dqn.py", "iterate"),
    ("act: choose actions", "algos/dqn.py", "_choose_actions"),
    ("act: Q-network forward for acting", "algos/dqn_learner.py", "greedy_actions"),
    ("envs: step (serial vectoriser)", "envs/vector.py", "step"),
    ("envs: step (subprocess vectoriser)", "envs/subprocess.py", "step"),
    ("replay: store the step", "algos/dqn.py", "_store"),
    ("replay: draw a batch", "algos/dqn.py", "_sample"),
    ("learner: gradient step (update)", "algos/dqn_learner.py", "update"),
    ("learner: backward", "torch/_tensor.py", "backward"),
    ("learner: optimizer step", "algos/optimizers.py", "step"),
    ("target network copy", "algos/dqn_learner.py", "update_target"),
)


def part_seconds(statistics: pstats.Stats, suffix: str, name: str) -> tuple[float, int]:
    """Inclusive seconds and calls of the functions called name in a file ending with suffix."""
    seconds, calls = 0.0, 0
    for (file, _, function), (_, primitive_calls, _, cumulative, _) in statistics.stats.items():
        if function == name and file.endswith(suffix):
            seconds, calls = seconds + cumulative, calls + primitive_calls
    return seconds, calls


def profile(spec, steps: int, warm_up: int) -> tuple[pstats.Stats, int]:
    trainer = DqnTrainer(spec, select_device(spec.job.device))
    try:
        while trainer.step < spec.dqn.learning_starts + warm_up:
            trainer.iterate()
        first = trainer.step
        profiler = cProfile.Profile()
        profiler.enable()
        while trainer.step < first + steps:
            trainer.iterate()
        trainer.fingerprint()  # an overlapped round still running is part of the steps profiled
        profiler.disable()
        return pstats.Stats(profiler), trainer.step - first
    finally:
        trainer.close()


def print_report(statistics: pstats.Stats, steps: int, top: int) -> None:
    print(f"{'part':40}{'µs/step':>9}{'calls/step':>12}")
    for label, suffix, name in PARTS:
        seconds, calls = part_seconds(statistics, suffix, name)
        if calls:
            print(f"{label:40}{1e6 * seconds / steps:>9.0f}{calls / steps:>12.2f}")
        else:
            # Some parts run only in some jobs (a vectoriser, a target copy in a short profile); a renamed
            # function shows here too, rather than dropping out of the table unseen.
            print(f"{label:40}{'-':>9}{'not called':>12}  ({suffix}:{name})")
    print(f"\nthe {top} functions with the most time of their own (µs per env step):")
    rows = sorted(statistics.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    for (file, line, function), (_, calls, own, cumulative, _) in rows:
        where = f"{Path(file).name}:{line}" if line else file
        print(f"{1e6 * own / steps:>9.0f} own {1e6 * cumulative / steps:>9.0f} in all  {function} ({where})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job")
    parser.add_argument("--steps", type=int, default=4_000, help="env steps profiled")
    parser.add_argument("--warm-up", type=int, default=2_000, help="untimed steps after learning starts")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.FIELD=VALUE",
                        help="change the job, as bench/learning_seeds.py --set does")
    results_format.add_out_argument(parser, "results/dqn-profile-JOB[-CHANGES].json")
    arguments = parser.parse_args()
    run = results_format.started("bench/dqn_profile.py", Path(arguments.job), arguments.set)
    with tempfile.TemporaryDirectory() as directory:
        spec = loading.load(changed_job(Path(arguments.job), None, arguments.set, Path(directory)))
    if spec.job.algo != "dqn":
        print(f"{arguments.job} is a {spec.job.algo} job; this bench profiles DQN", file=sys.stderr)
        return 2
    configure_torch(spec)
    statistics, steps = profile(spec, arguments.steps, arguments.warm_up)
    print(f"{spec.env.id}, {spec.env.num_envs} env(s), batch {spec.dqn.batch_size}, {spec.job.threads} torch "
          f"thread(s), overlap {spec.dqn.overlap}, flush_denormals {spec.job.flush_denormals}: {steps} env steps "
          f"profiled after {spec.dqn.learning_starts} + {arguments.warm_up}")
    print_report(statistics, steps, arguments.top)
    write_result(arguments, run, spec, statistics, steps)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, spec, statistics: pstats.Stats, steps: int) -> None:
    """The parts' table and the top functions', as printed."""
    column = results_format.column
    parts = {label: [1e6 * seconds / steps, calls / steps] if calls else [None, "not called"]
             for label, suffix, name in PARTS for seconds, calls in [part_seconds(statistics, suffix, name)]}
    top = sorted(statistics.stats.items(), key=lambda item: item[1][2], reverse=True)[:arguments.top]
    functions = {f"{function} ({Path(file).name}:{line})" if line else f"{function} ({file})":
                 [1e6 * own / steps, 1e6 * cumulative / steps] for (file, line, function), (_, _, own, cumulative, _)
                 in top}
    said = (f"{spec.env.num_envs} env(s), batch {spec.dqn.batch_size}, {spec.job.threads} torch thread(s), overlap "
            f"{spec.dqn.overlap}, flush_denormals {spec.job.flush_denormals}: {steps:,} env steps profiled after "
            f"{spec.dqn.learning_starts:,} + {arguments.warm_up:,}. cProfile adds a few µs to every Python call it "
            "sees: read the parts against each other.")
    tables = [results_format.measurement("By part", "part", [column("per env step", "µs", 0),
                                                               column("calls per env step", None, 2)], parts, said),
              results_format.measurement("The functions with the most time of their own", "function",
                                         [column("own, per env step", "µs", 0), column("in all, per env step", "µs", 0)],
                                         functions)]
    whole, update = parts[PARTS[0][0]][0], parts["learner: gradient step (update)"][0]
    finding = f"The gradient step took {100 * update / whole:.0f}% of a step's profiled time." if whole and update \
        else None
    job = Path(arguments.job)
    name = results_format.default_out(f"dqn-profile-{job.stem}", arguments.set).stem
    results_format.write_figures(arguments, run, name, f"Where a DQN step goes: {job.name} ({spec.env.id})", tables,
                                 finding, job, [spec.job.seed])


if __name__ == "__main__":
    sys.exit(main())
