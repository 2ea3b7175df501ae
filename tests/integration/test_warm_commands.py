"""The tests' warm server (tests/warm_commands.py) is used where it may be, and a forked command is the command."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import warm_commands
from rlsup.run.exit import EXIT_PAUSED
from rlsup_testing import (cartpole_job, checkpoint_reasons, final_fingerprint, interrupts_at_their_default,
                           path_hiding, start_rlsup, wait_for)
from user_envs import PACKAGE, WALK_ID, with_python_path, write_package
from rlsup.checkpoint.manifest import list_checkpoints


def test_a_variable_a_test_sets_sends_its_command_cold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """First in this file, so that in a process of its own (-n 0, or this file's xdist worker) it may be what
    starts the server: the server must not take this test's variable for everyone's (the next test)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
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


def test_a_test_that_imports_cv2_sends_no_later_command_cold() -> None:
    """cv2 prepends its lib64 to LD_LIBRARY_PATH as it is imported: the first test to read a video sent every
    later command of its pytest process cold (a local run: 1,260 s against 1,143). The baseline is taken with
    it imported, so its own import here changes nothing."""
    import cv2  # noqa: F401

    assert warm_commands.import_time_differences(dict(os.environ)) == set()


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


def test_a_user_package_on_pythonpath_is_forked_warm_and_trains(tmp_path: Path, monkeypatch) -> None:
    """A user's env package put on PYTHONPATH sent each of test_env_faults' commands cold: it shadows nothing
    the server imported, so the fork takes it on sys.path."""
    monkeypatch.setenv("PYTHONPATH", with_python_path(write_package(tmp_path / "user")))
    job = cartpole_job(tmp_path, total_steps=300)
    job.write_text(job.read_text().replace('id = "CartPole-v1"', f'id = "{WALK_ID}"\nimports = ["{PACKAGE}"]'))
    process = start_rlsup("run", job, "--run-dir", tmp_path / "run")
    assert isinstance(process, warm_commands.WarmProcess)
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr


@pytest.mark.parametrize("package", ["gymnasium", "sitecustomize"])
def test_a_pythonpath_hiding_what_the_server_imported_sends_its_command_cold(tmp_path: Path, monkeypatch,
                                                                           package: str) -> None:
    monkeypatch.setenv("PYTHONPATH", path_hiding(tmp_path, package))
    process = start_rlsup("run", cartpole_job(tmp_path, total_steps=100), "--run-dir", tmp_path / "run")
    assert not isinstance(process, warm_commands.WarmProcess)
    process.communicate(timeout=240)


@pytest.mark.parametrize("python_path", ["", "rel", "{tmp}/a:", "{tmp}/a:{tmp}/a:rel/../b", ":{tmp}/a"])
def test_a_fork_is_given_the_sys_path_a_fresh_interpreter_builds(tmp_path: Path, python_path: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "show_path.py").write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    value = python_path.format(tmp=tmp_path)
    fresh = subprocess.run([sys.executable, "-m", "show_path"], cwd=cwd, capture_output=True, text=True,
                           env={**warm_commands.BASELINE, "PYTHONPATH": value}, check=True)
    server = warm_commands.warm_server()
    assert json.loads(fresh.stdout) == warm_commands.command_sys_path(value, str(cwd), server.standard_path)
