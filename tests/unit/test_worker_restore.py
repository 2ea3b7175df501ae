"""What a resume restores besides the trainer: the best evaluation so far."""
from __future__ import annotations

from pathlib import Path

from rlsup.run import files as runfiles
from rlsup.worker.resume import best_evaluation_at


def test_the_best_evaluation_comes_from_the_checkpoint_or_else_from_the_metrics(tmp_path: Path) -> None:
    assert best_evaluation_at(tmp_path, {"extra": {"algo": "dqn", "best_evaluation": 7.5}}) == 7.5
    assert best_evaluation_at(tmp_path, {"extra": {"algo": "dqn", "best_evaluation": None}}) is None
    # A checkpoint written before its manifest recorded it: the metrics (already cut back to it) tell.
    metrics = runfiles.MetricsWriter(tmp_path)
    for step, mean in ((1000, 3.0), (2000, 5.0), (3000, 4.0)):
        metrics.write({"t": 0.0, "step": step, "kind": "eval", "mean": mean, "returns": [mean]})
    metrics.close()
    assert best_evaluation_at(tmp_path, {"extra": {"algo": "dqn"}}) == 5.0
