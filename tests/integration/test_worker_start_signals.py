"""A worker the daemon has just started, fresh or forked, signalled before it listens: a pause pauses, a reload reloads."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from rlsup import paths, spec as specs
from rlsup.run import files as runfiles
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.daemon.runner import Signal
from rlsup.daemon.supervisor import LocalRunner
from rlsup.daemon.warm_start import ForkedWorker
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup_testing import cartpole_job, metric_steps, wait_for

JOB_ID = 1


def spawned_worker(tmp_path: Path, *, warm: bool = False) -> tuple[LocalRunner, Path]:
    """A run directory as the daemon prepares one, and its worker started by the daemon's own runner: a fresh
    interpreter, or (warm) forked by the fork server, which this start waits for."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.load(cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=0)))
    runner = LocalRunner(warm_start=warm)
    runner.start(JOB_ID, run_dir)
    assert isinstance(runner.children[JOB_ID], ForkedWorker) is warm
    return runner, run_dir


def ended(runner: LocalRunner) -> object:
    """How the worker ended, once it has (the daemon's reap), else None."""
    outcomes = runner.reap()
    return outcomes[0][1] if outcomes else None


def assert_paused_cleanly(runner: LocalRunner, run_dir: Path, outcome) -> None:
    log = (run_dir / paths.LOG_FILE).read_text()
    assert outcome.code == EXIT_PAUSED and outcome.signal is None, (outcome, log)
    assert "Traceback" not in log, log
    assert read_exit(run_dir).code == EXIT_PAUSED
    assert [entry.path.name for entry in list_checkpoints(run_dir)], "a pause leaves a checkpoint to resume from"


# A forked worker is signalled sooner after its start than a fresh one (no interpreter to start first): the
# first stop lands the moment the server has answered, before the child's own first line has run.
@pytest.mark.parametrize("number, delay_s, warm", [(signal.SIGINT, 0.0, False), (signal.SIGTERM, 0.0, False),
                                                   (signal.SIGTERM, 0.1, False), (signal.SIGINT, 0.3, False),
                                                   (signal.SIGINT, 0.0, True), (signal.SIGTERM, 0.1, True)])
def test_a_stop_while_the_worker_starts_pauses_it(tmp_path: Path, number: int, delay_s: float, warm: bool) -> None:
    runner, run_dir = spawned_worker(tmp_path, warm=warm)
    try:
        time.sleep(delay_s)
        runner.children[JOB_ID].send_signal(number)
        outcome = wait_for(lambda: ended(runner), what="the worker to end")
    finally:
        runner.signal(JOB_ID, Signal.KILL)  # a failed test leaves no training behind
    assert_paused_cleanly(runner, run_dir, outcome)


@pytest.mark.parametrize("warm", [False, True])
def test_a_reload_while_the_worker_starts_is_a_reload_not_a_hangup(tmp_path: Path, warm: bool) -> None:
    runner, run_dir = spawned_worker(tmp_path, warm=warm)
    try:
        assert runner.signal(JOB_ID, Signal.RELOAD)  # SIGHUP, whose default would end the process
        wait_for(lambda: metric_steps(run_dir, "train") or runner.children[JOB_ID].poll() is not None,
                 what="training")
        assert runner.children[JOB_ID].poll() is None, (run_dir / paths.LOG_FILE).read_text()
        assert runner.signal(JOB_ID, Signal.PAUSE)
        outcome = wait_for(lambda: ended(runner), what="the worker to pause")
    finally:
        runner.signal(JOB_ID, Signal.KILL)
    assert_paused_cleanly(runner, run_dir, outcome)
