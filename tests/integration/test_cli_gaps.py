"""The real `rlsup` command where it used to crash or mislead: one line on stderr, a defined exit code."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, cartpole_job, cartpole_text, rlsup_command, run_rlsup

from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.cli import build_parser
from rlsup.jobs.store import Store


def run_into_closed_pipe(*arguments: str) -> subprocess.CompletedProcess:
    """Run rlsup with stdout a pipe whose reader is already gone, as `rlsup … | head` ends up."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        process = subprocess.Popen(rlsup_command(*arguments), stdout=writer, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    _, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, "", stderr)


def queue_job(home: Path, tmp_path: Path) -> tuple[int, Path]:
    """A queued job in the store with a real run directory, and no daemon to run it."""
    spec_path = cartpole_job(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.load(spec_path))
    with Store(home) as store:
        job = store.submit(name="cartpole", spec_path=spec_path, run_dir=run_dir, algo="dqn", env="CartPole-v1",
                           total_steps=2_000)
    return job.id, run_dir


def test_enjoy_video_without_pygame_names_the_render_extra(tmp_path):
    # A pygame that cannot be imported stands in for one never installed.
    shadow = tmp_path / "shadow" / "pygame"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named pygame')\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "job.toml").write_text(cartpole_text())
    runfiles.write_run_spec(run_dir, specs.load(tmp_path / "job.toml"))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(rlsup_command("enjoy", run_dir, "--render", "video"), capture_output=True, text=True,
                            timeout=120, env=environment)
    assert_one_line_error(result, 1, "pygame", "pip install 'rlsup[render]'")


@pytest.mark.parametrize("command", [["schema"], ["status", "JOB"]])
def test_a_closed_stdout_ends_quietly(command, rlsup_home, tmp_path):
    job_id, _ = queue_job(rlsup_home, tmp_path)
    result = run_into_closed_pipe(*[str(job_id) if word == "JOB" else word for word in command])
    assert result.stderr == ""
    assert result.returncode == 141


def test_validate_refuses_an_unknown_env_id_with_a_suggestion(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(cartpole_text().replace('"CartPole-v1"', '"CartPol-v1"'))
    line = next(number for number, text in enumerate(path.read_text().splitlines(), 1) if "CartPol-v1" in text)
    result = run_rlsup("validate", path)
    assert_one_line_error(result, 2, f"{path}:{line}: env.id:", "'CartPol-v1'", "did you mean 'CartPole-v1'")


def test_validate_knows_atari_ids(tmp_path):
    path = tmp_path / "pong.toml"
    path.write_text(cartpole_text().replace('id = "CartPole-v1"', 'id = "ALE/Pong-v5"\npreset = "atari"'))
    result = run_rlsup("validate", path)
    assert result.returncode == 0, result.stderr


def test_resume_of_a_run_directory_the_daemon_does_not_own_says_how_to_continue_it(tmp_path):
    run_dir = tmp_path / "foreground-run"
    run_dir.mkdir()
    (tmp_path / "job.toml").write_text(cartpole_text())
    runfiles.write_run_spec(run_dir, specs.load(tmp_path / "job.toml"))
    result = run_rlsup("resume", run_dir)
    assert_one_line_error(result, 1, str(run_dir), f"rlsup run --resume {run_dir}")


def test_every_option_of_every_command_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0]
    missing = [f"rlsup {action.dest}" for action in parser._actions if not action.help]
    for name, parser in commands.choices.items():
        missing += [f"{name} {action.dest}" for action in parser._actions if not action.help]
    assert missing == []


@pytest.mark.parametrize("command", [["list"], ["status", "1"], ["checkpoints", "1"], ["checkpoints", "latest"],
                                     ["logs", "1"], ["daemon", "status"]])
def test_a_read_only_command_leaves_a_missing_home_missing(command, tmp_path):
    home = tmp_path / "not-yet"
    result = subprocess.run(rlsup_command(*command), capture_output=True, text=True, timeout=60,
                            env=dict(os.environ, RLSUP_HOME=str(home)))
    assert "Traceback" not in result.stderr, result.stderr
    assert "no jobs" in result.stdout + result.stderr or "no runs" in result.stderr
    assert not home.exists()
