"""Colour in `rlsup list` only on a terminal (NO_COLOR respected), and shell completion scripts."""
from __future__ import annotations

import os
import pty
import subprocess

from rlsup_testing import cartpole_job, rlsup_command, run_rlsup

from rlsup import paths, spec as specs
from rlsup.run import files as runfiles
from rlsup.cli import build_parser
from rlsup.jobs.store import Store

ESCAPE = "\x1b["


def queue_job(home, tmp_path) -> int:
    """A queued job in the store, with no daemon to run it."""
    spec_path = cartpole_job(tmp_path, name="colourful")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.load(spec_path))
    with Store(home) as store:
        return store.submit(name="colourful", spec_path=spec_path, run_dir=run_dir, algo="dqn", env="CartPole-v1",
                            total_steps=2_000).id


def run_on_terminal(*arguments: str, **environment: str) -> str:
    """rlsup with stdout a pseudo-terminal, as a shell in a terminal runs it; what it printed."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(rlsup_command(*arguments), stdout=follower, stderr=subprocess.DEVNULL,
                               env={**os.environ, **environment})
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side closed: everything has been read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert process.wait(timeout=60) == 0
    return b"".join(chunks).decode()


def test_list_and_status_colour_states_only_on_a_terminal(rlsup_home, tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    job_id = queue_job(rlsup_home, tmp_path)
    for command in (["list"], ["status", str(job_id)]):
        piped = run_rlsup(*command)
        assert piped.returncode == 0 and "queued" in piped.stdout and ESCAPE not in piped.stdout
        shown = run_on_terminal(*command)
        assert "\x1b[36mqueued" in shown, shown
        assert ESCAPE not in run_on_terminal(*command, NO_COLOR="1")


def test_bash_completion_is_valid_and_names_every_command(tmp_path):
    result = run_rlsup("completion", "bash")
    assert result.returncode == 0, result.stderr
    script = tmp_path / "rlsup.bash"
    script.write_text(result.stdout)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    commands = build_parser()._subparsers._group_actions[0].choices
    for command in commands:
        if not command.startswith("__"):
            assert command in result.stdout
    assert 'status) options="-h --help --events"; references="jobs experiments";;' in result.stdout
    assert "__complete $references" in result.stdout and "--copy" in result.stdout
    assert "__complete $references" in run_rlsup("completion", "zsh").stdout
    assert "__complete jobs experiments" in run_rlsup("completion", "fish").stdout
    # fish reads \' inside single quotes as a quote: help text keeps its apostrophes.
    assert "-d 'check every file\\'s checksum'" in run_rlsup("completion", "fish").stdout


def test_complete_jobs_lists_ids_and_names_without_making_a_home(rlsup_home, tmp_path, monkeypatch):
    empty_home = tmp_path / "nowhere"
    monkeypatch.setenv("RLSUP_HOME", str(empty_home))
    nothing = run_rlsup("__complete", "jobs")
    assert (nothing.returncode, nothing.stdout) == (0, "") and not empty_home.exists()
    monkeypatch.setenv("RLSUP_HOME", str(rlsup_home))
    job_id = queue_job(rlsup_home, tmp_path)
    listed = run_rlsup("__complete", "jobs")
    assert listed.returncode == 0 and listed.stdout.split() == [str(job_id), "colourful"]
    assert (rlsup_home / paths.DATABASE).exists()
