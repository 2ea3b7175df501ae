"""What a resume pays to bring a run's TensorBoard event file back to its checkpoint, by how it does it.

    python bench/tensorboard_resume.py [--records 100000]

The result (bench/results_format.py) goes to --out, by default results/tensorboard-resume.json.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import results_format  # bench/ beside this script
from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.worker.tensorboard import TensorBoardLog


def record(step: int) -> dict:
    """A train record of 3 numbers, like DQN's."""
    return {"t": 1.0 + step, "kind": "train", "step": step, "loss": 1 / step, "q_mean": step / 3,
            "steps_per_second": 1000.0}


def written_run(run_dir: Path, records: int) -> tuple[int, dict]:
    """A run with records in metrics.jsonl and its event file; the checkpoint's (metrics bytes, event point)."""
    metrics, tensorboard = runfiles.MetricsWriter(run_dir), TensorBoardLog(run_dir)
    for step in range(1, records + 1):
        metrics.write(record(step))
        tensorboard.follow(record(step), enabled=True)
    metrics.sync()
    checkpoint = metrics.byte_length(), tensorboard.sync()
    for step in range(records + 1, records + 101):  # past the checkpoint: what a crash leaves behind
        metrics.write(record(step))
        tensorboard.follow(record(step), enabled=True)
    metrics.close()
    tensorboard.close()
    return checkpoint


def resume_seconds(run_dir: Path, metrics_bytes: int, point: dict | None, records: int) -> float:
    """Seconds from a resume's cut of metrics.jsonl to its first record in TensorBoard."""
    started = time.perf_counter()
    runfiles.truncate_metrics(run_dir, metrics_bytes)
    tensorboard = TensorBoardLog(run_dir)
    tensorboard.resume_at(point)
    metrics = runfiles.MetricsWriter(run_dir)
    metrics.write(record(records + 1))
    tensorboard.follow(record(records + 1), enabled=True)
    elapsed = time.perf_counter() - started
    metrics.close()
    tensorboard.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    results_format.add_out_argument(parser, "results/tensorboard-resume.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/tensorboard_resume.py")
    with tempfile.TemporaryDirectory() as scratch:
        original = Path(scratch) / "original"
        original.mkdir()
        metrics_bytes, point = written_run(original, arguments.records)
        timings = {}
        for name, crashed, recorded in (("rebuild from metrics.jsonl (no recorded length)", True, False),
                                        ("pause, then resume: append in place", False, True),
                                        ("crash restart: copy up to the checkpoint", True, True)):
            run_dir = Path(scratch) / "resumed"
            shutil.copytree(original, run_dir)
            event_file = run_dir / paths.TENSORBOARD / point["file"]
            if not crashed:
                with open(event_file, "r+b") as events:
                    events.truncate(point["bytes"])
            timings[name] = resume_seconds(run_dir, metrics_bytes, point if recorded else None, arguments.records)
            shutil.rmtree(run_dir)
    rebuild = next(iter(timings.values()))
    print(f"{arguments.records:,} records of 3 numbers")
    for name, seconds in timings.items():
        print(f"  {name:<50} {seconds * 1000:10.1f} ms   {rebuild / seconds:8.0f}x faster than a rebuild")
    column = results_format.column
    table = results_format.measurement(
        f"{arguments.records:,} records of 3 numbers", "how", [column("time", "ms", 1), column("rebuild / this", "x", 0)],
        {name: [1000 * seconds, rebuild / seconds] for name, seconds in timings.items()},
        "From a resume's cut of metrics.jsonl to its first record in TensorBoard.")
    fastest = min(timings.values())
    results_format.write_figures(arguments, run, "tensorboard-resume", "What a resume pays to bring a run's "
                                 "TensorBoard event file back to its checkpoint", [table],
                                 f"Resuming from the length a checkpoint recorded was {rebuild / fastest:.0f}x faster "
                                 "than a rebuild from metrics.jsonl.")


if __name__ == "__main__":
    main()
