"""The tests' warm server (tests/warm_commands.py) is used where it may be, and a forked command is the command."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import warm_commands
from rlsup.run.exit import EXIT_PAUSED
from rlsup_testing import (cartpole_job, checkpoint_reasons, final_fingerprint, interrupts_at_their_default,
                           start_rlsup, wait_for)
from rlsup.checkpoint.manifest import list_checkpoints


def test_a_variable_a_test_sets_sends_its_command_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """First in this file, so that in a process of its own (-n 0, or this file's xdist worker) it may be what
    starts the server: the server must not take this test's variable for everyone's (the next test)."""
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    process = start_rlsup("run", cartpole_job(tmp_path, total_steps=100), "--run-dir", tmp_path / "run")
    assert not isinstance(process, warm_commands.WarmProcess)
    process.communicate(timeout=240)


def test_a_run_under_pytest_is_forked_warm_and_trains_the_run_a_cold_one_does(tmp_path: Path) -> None:
    """Twice the suite sent nearly every command cold without a word (pytest's PYTEST_CURRENT_TEST, then a
    variable a test had set when the server started): a plain run under pytest must be forked."""
    assert warm_commands.import_time_differences(dict(os.environ)) == set()
    job = cartpole_job(tmp_path, total_steps=600)
    warm = start_rlsup("run", job, "--run-dir", tmp_path / "warm")
    cold = start_rlsup("run", job, "--run-dir", tmp_path / "cold", cold=True)
    assert isinstance(warm, warm_commands.WarmProcess)
    assert not isinstance(cold, warm_commands.WarmProcess)
    for process in (warm, cold):
        _, stderr = process.communicate(timeout=240)
        assert process.returncode == 0, stderr
    assert final_fingerprint(tmp_path / "warm") == final_fingerprint(tmp_path / "cold")


def test_a_forked_run_pauses_on_ctrl_c_with_a_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with interrupts_at_their_default():
        process = start_rlsup("run", cartpole_job(tmp_path, total_steps=1_000_000, checkpoint_every=300),
                              "--run-dir", run_dir)
    try:
        assert isinstance(process, warm_commands.WarmProcess)
        wait_for(lambda: list_checkpoints(run_dir) or process.poll() is not None, what="a checkpoint")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:  # a failed test leaves no million-step training behind for the others
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == EXIT_PAUSED, stderr
    assert "Traceback" not in stderr
    assert checkpoint_reasons(run_dir)[-1][1] == "pause"
