"""A third algorithm installed as a plugin (an entry point, no edit to rlsup) trains, pauses, resumes and plays."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from rlsup.run import files as runfiles
from rlsup.run.exit import read_exit
from rlsup.run.status import read_worker_status
from rlsup_testing import final_fingerprint, install_plugin, metric_steps, pause_then_resume, run_rlsup

STEPS = 3_000

TINY_JOB = """
[job]
algo = "tiny"
seed = 5
total_steps = {total_steps}
device = "cpu"
threads = 1

[env]
id = "CartPole-v1"

[checkpoint]
every_steps = 1000
keep = 3

[log]
every_steps = 250

[eval]
every_steps = 1000
episodes = 2
"""


@pytest.fixture(scope="module", autouse=True)
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin on the PYTHONPATH of every process this module starts (rlsup, its worker, probes)."""
    site = tmp_path_factory.mktemp("site-packages")
    install_plugin(site, "tiny_algorithm", "tiny = tiny_algorithm:ALGORITHM")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
        yield site


def tiny_job(directory: Path, *, total_steps: int, name: str) -> Path:
    path = directory / f"{name}.toml"
    path.write_text(TINY_JOB.format(total_steps=total_steps))
    return path


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("straight")
    run_dir = directory / "run"
    result = run_rlsup("run", tiny_job(directory, total_steps=STEPS, name="tiny"), "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def test_the_plugin_trains_to_its_budget_and_logs_its_own_loss(straight_run: Path) -> None:
    exit_record = read_exit(straight_run)
    assert (exit_record.code, exit_record.step) == (0, STEPS)
    train = [record for record in runfiles.read_metrics(straight_run) if record["kind"] == "train"]
    assert [record["step"] for record in train] == list(range(250, STEPS + 1, 250))
    assert all("td_loss" in record for record in train)
    assert metric_steps(straight_run, "eval") == [1000, 2000, 3000]
    assert read_worker_status(straight_run).device == "cpu"


def test_pause_by_sigint_then_resume_is_bit_exact(tmp_path: Path, straight_run: Path) -> None:
    run_dir = tmp_path / "run"
    pause_then_resume(tiny_job(tmp_path, total_steps=STEPS, name="tiny"), run_dir, train_step=1_250,
                      total_steps=STEPS)
    assert final_fingerprint(run_dir) == final_fingerprint(straight_run)
    assert metric_steps(run_dir, "train") == metric_steps(straight_run, "train")


def test_enjoy_plays_the_plugins_policy(straight_run: Path) -> None:
    result = run_rlsup("enjoy", straight_run, "--episodes", "2", "--json")
    assert result.returncode == 0, result.stderr
    played = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(played["returns"]) == 2


PROBE_WITHOUT_TORCH = """
import sys
from rlsup import spec
from rlsup.spec import registry
from rlsup.tui.metrics import JobMetrics

metrics = JobMetrics(sys.argv[1])
metrics.update()
assert "torch" not in sys.modules, "finding the plugin imported torch"
print(registry.algorithm_names(), metrics.view().loss_name)
"""


def test_validation_and_the_tui_know_the_plugin_without_torch(straight_run: Path) -> None:
    result = subprocess.run([sys.executable, "-c", PROBE_WITHOUT_TORCH, str(straight_run)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["('dqn',", "'vtrace',", "'sac',", "'tiny')", "td_loss"]


def test_an_unknown_algorithm_is_refused_naming_the_plugin_among_the_choices(tmp_path: Path) -> None:
    job = tmp_path / "ppo.toml"
    job.write_text(TINY_JOB.format(total_steps=10).replace('algo = "tiny"', 'algo = "ppo"'))
    result = run_rlsup("validate", job)
    assert result.returncode != 0
    assert "job.algo: must be one of 'dqn', 'vtrace', 'sac', 'tiny', not 'ppo'" in result.stderr + result.stdout
