"""A second interrupt at any point leaves a correct exit.json and no traceback (issue 9)."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from rlsup import runfiles, worker
from rlsup import spec as specs


@pytest.fixture
def restored_handlers():
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def test_a_second_interrupt_while_finishing_still_records_the_exit(tmp_path: Path, restored_handlers) -> None:
    runfiles.write_run_spec(tmp_path, specs.JobSpec())
    job = worker.Worker(tmp_path)
    job.signals.install()
    job.last_checkpoint = str(tmp_path / "checkpoints" / "step-000000001000")
    os.kill(os.getpid(), signal.SIGINT)  # the first: a pause, whose checkpoint is written
    assert job.signals.pause_requested
    job.signals.abort_raises = False  # training is over: what run() sets once the loop has returned
    write_status = job._write_status

    def interrupted_write_status(phase: str, clock=None) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # the second, in the middle of finishing
        write_status(phase, clock)

    job._write_status = interrupted_write_status
    code = job._finish(worker.EXIT_PAUSED, "paused at step 1000 with a checkpoint")
    assert code == worker.EXIT_ABORTED
    record = runfiles.read_exit(tmp_path)
    assert (record["code"], record["checkpoint"]) == (worker.EXIT_ABORTED, job.last_checkpoint)
    assert "second interrupt" in record["reason"]


def test_a_second_interrupt_while_training_aborts_once(restored_handlers) -> None:
    signals = worker.Signals()
    signals.install()
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(worker.Aborted):
        os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)  # a third while the abort is being recorded: noted, not raised
    assert signals.abort_requested and not signals.abort_raises
