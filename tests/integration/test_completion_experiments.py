"""Shell completion offers experiments' names where a command takes one (pause, status, plot), and only there."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from rlsup_testing import cartpole_job, run_rlsup

from rlsup import client


def completions(script: Path, bin_dir: Path, *words: str) -> list[str]:
    """What bash's completion function offers for the command line `rlsup WORDS…` (the last word being typed)."""
    line = " ".join(["rlsup", *map(shlex.quote, words)])
    program = (f'source {shlex.quote(str(script))}; COMP_WORDS=({line}); COMP_CWORD={len(words)}; _rlsup; '
               'printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=120, cwd=bin_dir,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    return sorted(word for word in result.stdout.splitlines() if word)


def test_bash_completes_experiment_names_where_a_command_takes_them(rlsup_home, tmp_path):
    client.submit_experiment(cartpole_job(tmp_path, name="lrsweep"), seeds=(1, 2), home=rlsup_home,
                             start_daemon=False)
    lone = client.submit(cartpole_job(tmp_path, name="lone"), home=rlsup_home, start_daemon=False)
    listed = run_rlsup("__complete", "jobs", "experiments")
    assert listed.returncode == 0 and listed.stdout.split()[-1] == "lrsweep", listed.stdout
    assert "lrsweep" not in run_rlsup("__complete", "jobs").stdout.split()

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rlsup").write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m rlsup.cli "$@"\n')
    (bin_dir / "rlsup").chmod(0o755)
    script = tmp_path / "rlsup.bash"
    script.write_text(run_rlsup("completion", "bash").stdout)

    for command in ("pause", "resume", "kill", "status", "plot"):
        assert completions(script, bin_dir, command, "lr") == ["lrsweep", "lrsweep-s1", "lrsweep-s2"], command
    assert completions(script, bin_dir, "status", "lo") == ["lone"]
    # logs, enjoy and export read one run: an experiment's name is no answer there.
    for command in ("logs", "enjoy", "export"):
        assert completions(script, bin_dir, command, "lr") == ["lrsweep-s1", "lrsweep-s2"], command
    assert str(lone.id) in completions(script, bin_dir, "logs", "")
