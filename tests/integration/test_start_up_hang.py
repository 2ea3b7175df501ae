"""A start-up that hangs (a user's env package) still answers Ctrl-C: the first waits as a pause, the second leaves."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from rlsup.run.exit import EXIT_ABORTED
from rlsup_testing import cartpole_job, start_rlsup, wait_for

# A user's env package whose import hangs, as one waiting on a licence server or a lock would.
HANGING_PACKAGE = '''import pathlib, time
pathlib.Path(__file__).with_name("imported").write_text("yes")
time.sleep(3600)
'''


def test_a_second_ctrl_c_leaves_a_start_up_that_hangs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    (site / "hanging_envs").mkdir(parents=True)
    (site / "hanging_envs" / "__init__.py").write_text(HANGING_PACKAGE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    job = cartpole_job(tmp_path, total_steps=1_000)
    job.write_text(job.read_text().replace('id = "CartPole-v1"',
                                           f'id = "CartPole-v1"\nimports = {json.dumps(["hanging_envs"])}'))
    run_dir = tmp_path / "run"
    process = start_rlsup("run", job, "--run-dir", run_dir)
    try:
        wait_for(lambda: (site / "hanging_envs" / "imported").exists(), timeout=120)
        process.send_signal(signal.SIGINT)
        with pytest.raises(subprocess.TimeoutExpired):  # the first one waits for start-up to end, as a pause
            process.wait(timeout=1)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == EXIT_ABORTED, stderr
    assert "interrupted twice while starting" in stderr
    assert "Traceback" not in stderr
    # The env is checked before the run is made: leaving during the check leaves no half-made run behind.
    assert not run_dir.exists()
