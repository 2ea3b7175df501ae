"""Whether [job] flush_denormals changes a DQN job's trajectory, and how much faster it trains: both modes side by side.

Each mode trains the job in this process from the same seed; at each mark it prints both networks'
fingerprints, whether they are still equal, the subnormal share of Adam's moments without flushing, and
each mode's steps/s over the last stretch. Flushing zeroes subnormal moments, whose step of a weight is
far below its last bit, so the networks can stay equal for a long time; where they part, the run is another.

    python bench/flush_denormals.py jobs/minatar-dqn.toml --steps 100000 --every 10000 [--set dqn.lr=2.5e-4]

The result (bench/results_format.py) goes to --out, by default results/flush-denormals-JOB[-CHANGES].json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlsup.algos.device import configure_torch, select_device
from rlsup.algos.dqn import DqnTrainer
from rlsup.spec import loading

import results_format  # bench/ beside this script
from learning_seeds import changed_job


def subnormal_share(trainer: DqnTrainer) -> float:
    """The share of Adam's (or RMSprop's) state entries that are subnormal floats."""
    smallest_normal = torch.finfo(torch.float32).tiny
    tensors = [tensor for state in trainer.learner.optimizer.state.values() for name, tensor in state.items()
               if name != "step" and tensor.is_floating_point()]
    subnormal = sum(int(((tensor != 0) & (tensor.abs() < smallest_normal)).sum()) for tensor in tensors)
    return subnormal / max(1, sum(tensor.numel() for tensor in tensors))


class Side:
    """One mode's trainer, trained stretch by stretch with its mode set around each (one thread holds both)."""

    def __init__(self, spec, flush: bool) -> None:
        self.spec = spec.replace("job", flush_denormals=flush)
        configure_torch(self.spec)
        self.trainer = DqnTrainer(self.spec, select_device("cpu"))
        self.seconds = 0.0

    def train_to(self, step: int) -> float:
        """Steps/s of the stretch."""
        configure_torch(self.spec)
        began, first = time.perf_counter(), self.trainer.step
        while self.trainer.step < step:
            self.trainer.iterate()
        seconds = time.perf_counter() - began
        self.seconds += seconds
        return (self.trainer.step - first) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--every", type=int, default=10_000)
    parser.add_argument("--set", action="append", default=[], metavar="TABLE.FIELD=VALUE",
                        help="change the job, as bench/learning_seeds.py --set does")
    results_format.add_out_argument(parser, "results/flush-denormals-JOB[-CHANGES].json")
    arguments = parser.parse_args()
    run = results_format.started("bench/flush_denormals.py", Path(arguments.job), arguments.set)
    with tempfile.TemporaryDirectory(prefix="rlsup-flush-") as directory:
        spec = loading.load(changed_job(Path(arguments.job), None, arguments.set, Path(directory)))
    if spec.job.algo != "dqn":
        print(f"{arguments.job}: this bench trains DQN jobs, not {spec.job.algo}", file=sys.stderr)
        return 2
    if spec.job.threads != 1:  # torch's intra-op threads keep the mode they were made with
        print(f"{arguments.job}: this bench switches the float mode between its sides in one thread, so it "
              "needs [job] threads = 1 (--set job.threads=1)", file=sys.stderr)
        return 2
    kept, flushed = Side(spec, flush=False), Side(spec, flush=True)
    print(f"{spec.env.id}, seed {spec.job.seed}, {spec.job.threads} thread(s): fingerprints without and with "
          "[job] flush_denormals")
    print(f"{'step':>9}{'equal':>7}{'subnormal':>11}{'steps/s':>9}{'flushed':>9}  fingerprints")
    rows = {}
    for mark in range(arguments.every, arguments.steps + 1, arguments.every):
        rate = kept.train_to(mark)
        share = subnormal_share(kept.trainer)  # before the other side's mode, which reads subnormals as zero
        flushed_rate = flushed.train_to(mark)
        ours, theirs = kept.trainer.fingerprint(), flushed.trainer.fingerprint()
        print(f"{mark:>9}{str(ours == theirs).lower():>7}{share:>10.1%}{rate:>9.0f}"
              f"{flushed_rate:>9.0f}  {ours[:12]} {theirs[:12]}", flush=True)
        rows[f"{mark:,}"] = ["yes" if ours == theirs else "no", 100 * share, rate, flushed_rate, flushed_rate / rate]
    print(f"in all: {kept.seconds:.0f} s without flushing, {flushed.seconds:.0f} s with it "
          f"({kept.seconds / flushed.seconds:.2f}x)")
    write_result(arguments, run, spec, rows, kept.seconds / flushed.seconds)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, spec, rows: dict[str, list], ratio: float) -> None:
    column = results_format.column
    columns = [column("fingerprints equal"), column("Adam's moments subnormal, not flushed", "%", 1),
               column("steps/s, not flushed", "steps/s", 0), column("steps/s, flushed", "steps/s", 0),
               column("flushed / not", "x", 2)]
    table = results_format.measurement(
        "Both modes side by side, stretch by stretch", "step", columns, rows,
        f"{spec.env.id}, seed {spec.job.seed}; each mode trains the job in this process from the same seed, and each "
        "stretch's steps/s is its own.")
    equal = all(values[0] == "yes" for values in rows.values())
    finding = (f"Flushing trained {ratio:.2f}x as fast over {arguments.steps:,} steps, with the networks' "
               f"fingerprints {'equal at every mark' if equal else 'parting at some mark: another run'}.")
    job = Path(arguments.job)
    name = results_format.default_out(f"flush-denormals-{job.stem}", arguments.set).stem
    results_format.write_figures(arguments, run, name, f"DQN with [job] flush_denormals against without: {job.name}",
                                 [table], finding, job, [spec.job.seed])


if __name__ == "__main__":
    sys.exit(main())
