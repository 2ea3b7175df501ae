"""TensorBoardLog across a resume: continued from a checkpoint's recorded event file length, else rebuilt,
as TensorBoard's own reader sees it."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.worker.tensorboard import EVENT_FILES, TensorBoardLog

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def train_record(step: int) -> dict:
    return {"t": 1.0 + step, "kind": "train", "step": step, "loss": step / 7}


class Session:
    """One worker's writing: metrics.jsonl and the event files, as the worker feeds them."""

    def __init__(self, run_dir: Path, point: dict | None):
        self.metrics = runfiles.MetricsWriter(run_dir)
        self.tensorboard = TensorBoardLog(run_dir)
        self.tensorboard.resume_at(point)

    def write(self, steps: range) -> None:
        for step in steps:
            self.metrics.write(train_record(step))
            self.tensorboard.follow(train_record(step), enabled=True)

    def checkpoint(self) -> tuple[int, dict | None]:
        self.metrics.sync()
        return self.metrics.byte_length(), self.tensorboard.sync()

    def close(self) -> None:
        self.metrics.close()
        self.tensorboard.close()


def loss_steps(reader) -> list[int]:
    reader.Reload()
    return [event.step for event in reader.Scalars("train/loss")]


def fresh_reader(run_dir: Path):
    return event_accumulator.EventAccumulator(str(run_dir / paths.TENSORBOARD),
                                              size_guidance={event_accumulator.SCALARS: 0})


@pytest.mark.parametrize("lost_steps", [0, 5], ids=["pause", "restart-from-an-older-checkpoint"])
@pytest.mark.parametrize("recorded", [True, False], ids=["continued", "rebuilt"])
def test_after_a_resume_tensorboard_has_every_step_once(tmp_path: Path, lost_steps: int, recorded: bool) -> None:
    first = Session(tmp_path, None)
    first.write(range(1, 11))
    metrics_bytes, point = first.checkpoint()
    assert point is not None and point["bytes"] > 0
    first.write(range(11, 11 + lost_steps))  # written after the checkpoint, then lost to a crash
    assert loss_steps(fresh_reader(tmp_path)) == list(range(1, 11 + lost_steps))
    first.close()

    runfiles.truncate_metrics(tmp_path, metrics_bytes)  # as a resume does
    second = Session(tmp_path, point if recorded else None)
    second.write(range(11, 21))
    second.checkpoint()
    second.close()
    assert loss_steps(fresh_reader(tmp_path)) == list(range(1, 21))
    files = list((tmp_path / paths.TENSORBOARD).glob(EVENT_FILES))
    assert len(files) == 1
    if recorded and not lost_steps:
        assert files[0].name == point["file"]  # appended in place: nothing was rewritten


def test_a_tensorboard_watching_across_a_pause_and_resume_reads_on(tmp_path: Path) -> None:
    first = Session(tmp_path, None)
    first.write(range(1, 11))
    metrics_bytes, point = first.checkpoint()
    first.close()
    live = fresh_reader(tmp_path)
    assert loss_steps(live) == list(range(1, 11))
    second = Session(tmp_path, point)
    second.write(range(11, 21))
    assert loss_steps(live) == list(range(1, 21))  # flushed as written, in the file it was reading
    second.close()


@pytest.mark.parametrize("spoil", ["missing", "shorter", "second-file"])
def test_an_event_file_not_as_the_checkpoint_recorded_it_is_rebuilt(tmp_path: Path, spoil: str) -> None:
    first = Session(tmp_path, None)
    first.write(range(1, 11))
    metrics_bytes, point = first.checkpoint()
    first.close()
    event_file = tmp_path / paths.TENSORBOARD / point["file"]
    if spoil == "missing":
        event_file.unlink()
    elif spoil == "shorter":
        event_file.write_bytes(event_file.read_bytes()[:point["bytes"] // 2])
    else:
        (event_file.parent / f"{point['file']}.copy").write_bytes(event_file.read_bytes())

    second = Session(tmp_path, point)
    second.write(range(11, 16))
    second.close()
    assert loss_steps(fresh_reader(tmp_path)) == list(range(1, 16))
    assert [path.name for path in event_file.parent.glob(EVENT_FILES)] != [point["file"]]


# A worker SIGKILLed between checkpoints: it checkpoints at step 10, logs `lost` more steps, and dies.
CRASHING_WORKER = """
import json, os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from test_tensorboard_resume import Session

run_dir, lost = Path(sys.argv[2]), int(sys.argv[3])
session = Session(run_dir, None)
session.write(range(1, 11))
metrics_bytes, point = session.checkpoint()
print(json.dumps({"metrics_bytes": metrics_bytes, "point": point}), flush=True)
session.write(range(11, 11 + lost))
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("lost_steps", [0, 3], ids=["killed-at-its-checkpoint", "killed-after-logging-more"])
def test_a_worker_killed_between_checkpoints_resumes_with_every_step_once(tmp_path: Path, lost_steps: int) -> None:
    """A real SIGKILL, so that only what reached the OS survives: every logged record did (a live TensorBoard
    saw them), and the resume copies the file up to its checkpoint, or appends in place where it ends there."""
    crashed = subprocess.run([sys.executable, "-c", CRASHING_WORKER, str(Path(__file__).parent), str(tmp_path),
                              str(lost_steps)], capture_output=True, text=True, timeout=120)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    written = json.loads(crashed.stdout)
    point = written["point"]
    assert loss_steps(fresh_reader(tmp_path)) == list(range(1, 11 + lost_steps))  # each record as logged

    runfiles.truncate_metrics(tmp_path, written["metrics_bytes"])  # as a resume does
    second = Session(tmp_path, point)
    second.write(range(11, 21))
    second.checkpoint()
    second.close()
    assert loss_steps(fresh_reader(tmp_path)) == list(range(1, 21))
    files = list((tmp_path / paths.TENSORBOARD).glob(EVENT_FILES))
    assert len(files) == 1 and (files[0].name == point["file"]) == (lost_steps == 0), (files, point)
