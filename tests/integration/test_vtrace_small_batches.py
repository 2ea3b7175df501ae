"""V-trace with batches smaller than an actor's round, and a foreground run whose stdout reader dies."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import torch
from test_impala import actor_pids

from rlsup import spec as specs
from rlsup.algos.impala import VtraceTrainer
from rlsup.checkpoint.choose import latest_verified
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup_testing import (alive, group_killed_on_exit, metric_steps, run_rlsup, start_in_own_session,
                           vtrace_text, wait_for)


def small_batch_job(directory: Path, *, total_steps: int, serial: bool, actors: int = 1) -> Path:
    """A round of 8 unrolls feeds two updates of 4 through a queue that holds only one batch."""
    path = directory / f"small-batch-{'serial' if serial else 'parallel'}.toml"
    path.write_text(vtrace_text(total_steps=total_steps, serial=serial, seed=3, log_every=200, actors=actors,
                                envs_per_actor=8, unroll_length=5, batch_size=4, hidden_sizes=[16], feature_size=8))
    return path


def test_serial_run_with_a_batch_smaller_than_a_round_trains_to_its_budget(tmp_path: Path) -> None:
    total = 100 * 5 * 4  # 100 updates of unroll_length × batch_size
    job = small_batch_job(tmp_path, total_steps=total, serial=True)
    assert run_rlsup("validate", job).returncode == 0
    run_dir = tmp_path / "run"
    result = run_rlsup("run", job, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    # Serial mode trains a whole round per iteration, so the budget may be passed within that round.
    assert total <= read_exit(run_dir).step < total + 8 * 5


def test_parallel_run_whose_output_reader_died_pauses_and_exits(tmp_path: Path) -> None:
    """Ctrl-C after the terminal reading `rlsup run` went away: writing the outcome fails with a broken
    pipe, and the learner must still stop its actors (which ignore SIGINT) and exit with its checkpoint."""
    job = small_batch_job(tmp_path, total_steps=10_000_000, serial=False, actors=2)
    run_dir = tmp_path / "run"
    with group_killed_on_exit(start_in_own_session("run", job, "--run-dir", run_dir)) as process:
        wait_for(lambda: metric_steps(run_dir, "train") or process.poll() is not None, timeout=120,
                 what="a train record")
        actors = actor_pids(run_dir)
        assert process.poll() is None and len(actors) == 2
        process.stdout.close()  # the reader dies: every later write to either pipe fails
        process.stderr.close()
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
    entry = latest_verified(run_dir)
    assert entry is not None and entry.reason == "pause"
    assert read_exit(run_dir).code == EXIT_PAUSED  # the outcome is recorded all the same
    wait_for(lambda: not any(map(alive, actors)), timeout=30, what="the actors to exit with their learner")


def test_learner_never_waits_on_actors_while_it_holds_a_round(tmp_path: Path) -> None:
    """A round held back by a full queue goes in before the learner waits for more: its actor, whose
    groups the learner then holds, cannot deliver, so each such wait was a whole RECEIVE_WAIT_S lost."""
    spec = specs.load(small_batch_job(tmp_path, total_steps=10_000, serial=False))
    trainer = VtraceTrainer(spec, torch.device("cpu"))
    try:
        trainer.iterate()  # starts the real actor process
        receive, waits_while_holding = trainer.actors.receive, []

        def recording_receive(timeout: float):
            if trainer.pending and timeout > 0:
                waits_while_holding.append(timeout)
            return receive(timeout)

        trainer.actors.receive = recording_receive
        while trainer.learner.updates < 40:
            trainer.iterate()
        assert waits_while_holding == []
    finally:
        trainer.close()
