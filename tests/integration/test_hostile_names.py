"""A job's name is data, never code: a live edit cannot make it a command for the shell's completion, nor put
escape sequences on the user's terminal (issue 23 item 2)."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rlsup_testing import cartpole_job, run_rlsup

from rlsup import spec as specs
from rlsup.run import files as runfiles
from rlsup.jobs.store import Store

# A name as a hostile job file can spell it: a command substitution, backquotes, a colour escape, a bidi override.
HOSTILE = "$(touch MARKER)`touch BACKQUOTED`\x1b[31mred\u202eevil"
HOSTILE_TOML = '"$(touch MARKER)`touch BACKQUOTED`\\u001b[31mred\\u202eevil"'
SHELLS = ["bash"] + [shell for shell in ("zsh", "fish") if shutil.which(shell)]


def control_characters(text: str) -> list[str]:
    """The characters of text a terminal would act on instead of showing (line breaks aside)."""
    return [character for character in text if not character.isprintable() and character != "\n"]


def completion_bin(tmp_path: Path) -> Path:
    """A directory with an `rlsup` that runs this checkout's CLI, as an installed one would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "rlsup").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m rlsup.cli "$@"\n')
    (bin_dir / "rlsup").chmod(0o755)
    return bin_dir


def complete_in(shell: str, tmp_path: Path, *words: str) -> list[str]:
    """What the shell's rlsup completion function offers for `rlsup WORDS…`, run by the real shell in tmp_path."""
    script = tmp_path / f"rlsup.{shell}"
    script.write_text(run_rlsup("completion", shell).stdout)
    line = " ".join(["rlsup", *map(shlex.quote, words)])
    program = f'source {shlex.quote(str(script))}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; '
    if shell == "fish":  # fish completes a command line given as a string, as it does at TAB
        program = f'source {shlex.quote(str(script))}; complete -C {shlex.quote(line)}'
    elif shell == "bash":
        program += '_rlsup; printf "%s\\n" "${COMPREPLY[@]}"'
    else:  # zsh calls the function through bashcompinit's compgen -F, which prints what it offers
        program = ("autoload -U +X compinit && compinit -u; "  # -u: never ask whether to trust a directory
                   + program + f"words=({line}); CURRENT={len(words) + 1}; "
                   f"compgen -F _rlsup -- {shlex.quote(words[-1])}")
    bin_dir = completion_bin(tmp_path)
    result = subprocess.run([shell, "-c", program], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    return [word for word in result.stdout.splitlines() if word]


def assert_nothing_ran(tmp_path: Path) -> None:
    assert not (tmp_path / "MARKER").exists() and not (tmp_path / "BACKQUOTED").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_completion_never_runs_what_a_name_says(rlsup_home, tmp_path, shell):
    # A store written before names were sanitised on every path still holds the raw name.
    spec_path = cartpole_job(tmp_path, name="plain")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.load(spec_path))
    with Store(rlsup_home) as store:
        for name in (HOSTILE, "$(touch MARKER)", "`touch BACKQUOTED`"):
            store.submit(name=name, spec_path=spec_path, run_dir=run_dir, algo="dqn", env="CartPole-v1")
        store.submit(name="plain", spec_path=spec_path, run_dir=run_dir, algo="dqn", env="CartPole-v1")
    for typed in ("", "$", "`", "p"):
        offered = complete_in(shell, tmp_path, "pause", typed)
        assert_nothing_ran(tmp_path)
        assert all(word.startswith(typed) for word in offered), offered
    assert complete_in(shell, tmp_path, "pause", "p") == ["plain"]
    assert {"plain", "$(touch MARKER)", "`touch BACKQUOTED`"} <= set(complete_in(shell, tmp_path, "pause", ""))
    listed = run_rlsup("list")
    assert listed.returncode == 0 and not control_characters(listed.stdout + listed.stderr), listed.stdout
    shown = run_rlsup("status", "1")  # the hostile name's job
    assert shown.returncode == 0 and not control_characters(shown.stdout + shown.stderr), shown.stdout
    (run_dir / "worker.log").write_text("step 1\n\x1b[2J\x1b[Hcleared\rprogress \u202eright-to-left\n")
    logged = run_rlsup("logs", "4")
    assert logged.returncode == 0 and "\\x1b[2J\\x1b[Hcleared" in logged.stdout, logged.stdout
    assert "progress \\u202eright-to-left" in logged.stdout, logged.stdout
    assert not control_characters(logged.stdout + logged.stderr), logged.stdout


def test_a_live_edit_of_the_name_is_sanitised_like_a_submit(harness, tmp_path):
    harness.settings(cpu_jobs=0)  # hold the queue: the edit applies to a queued job as to a running one
    harness.start_daemon()
    spec = harness.job_file("renamed")
    job = harness.submit(spec)
    spec.write_text(spec.read_text().replace("[job]\n", f"[job]\nname = {HOSTILE_TOML}\n", 1))
    harness.wait_for(lambda: harness.events(job.id, "edit"), timeout=30, what="the edit to apply",
                     report=lambda: harness.report(job.id))
    stored = harness.job(job.id).name
    assert stored == specs.sanitize_name(HOSTILE), stored
    assert specs.load(Path(job.run_dir) / "job.toml").job.name == stored
    listed = run_rlsup("list")
    assert listed.returncode == 0 and stored in listed.stdout
    assert not control_characters(listed.stdout + listed.stderr), listed.stdout
    for shell in SHELLS:
        complete_in(shell, tmp_path, "pause", "")
        assert_nothing_ran(tmp_path)
