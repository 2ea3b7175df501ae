"""The TUI's incremental reading of a run's evaluations agrees with `rlsup status`'s whole-file reading."""
from __future__ import annotations

import json
from pathlib import Path

from rlsup import paths
from rlsup.views import groups
from rlsup.tui.experiment import EvaluationReader


def append(run_dir: Path, *records: dict) -> None:
    with open(run_dir / paths.METRICS_FILE, "a") as handle:
        handle.writelines(json.dumps(record) + "\n" for record in records)


def evaluation(step: int, mean: object) -> dict:
    return {"kind": "eval", "step": step, "mean": mean}


def test_the_last_and_best_evaluation_read_piecewise_equal_a_whole_read(tmp_path) -> None:
    reader = EvaluationReader(tmp_path)
    reader.update()
    assert reader.evaluated is None and groups.evaluated(tmp_path) is None  # no file yet

    append(tmp_path, {"kind": "episode", "step": 10, "return": 99.0}, evaluation(100, 20.0), evaluation(200, 35.5))
    reader.update()
    append(tmp_path, evaluation(300, 12.0), evaluation(350, True), evaluation(380, float("nan")),  # not returns
           {"kind": "train", "step": 390, "mean": 1000.0})  # a mean, but not an evaluation's
    reader.update()
    assert reader.evaluated == groups.evaluated(tmp_path) == groups.Evaluated(final=12.0, best=35.5)

    # A resume cuts the file back to its checkpoint: what was cut is forgotten by both.
    kept = (tmp_path / paths.METRICS_FILE).read_text().splitlines()[:2]
    (tmp_path / paths.METRICS_FILE).write_text("\n".join(kept) + "\n")
    reader.update()
    assert reader.evaluated == groups.evaluated(tmp_path) == groups.Evaluated(final=20.0, best=20.0)
