"""[job] flush_denormals: every process of a run computes in the float mode its job names, and pauses keep it."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from rlsup_testing import final_fingerprint, pause_then_resume, run_rlsup
from test_env_faults import DQN_FIELDS, DQN_REPLAY, JOB, VTRACE_FIELDS, VTRACE_REPLAY
from user_envs import PACKAGE, SUBNORMAL_ID, SUBNORMAL_LOG_VARIABLE, with_python_path, write_package

from rlsup import spec as specs
from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import load_checkpoint

# DQN: the worker steps one slice of the four envs and an env process the other. V-trace: two actor processes.
ALGO_PARTS = {"dqn": {"vectoriser": "subprocess", "algo_fields": DQN_FIELDS, "replay": DQN_REPLAY},
              "vtrace": {"vectoriser": "serial", "algo_fields": VTRACE_FIELDS, "replay": VTRACE_REPLAY}}

# MinAtar's sparse frames leave many weights without gradient for hundreds of steps, so Adam's first moments
# decay below float32's normal range within a thousand updates: where flushing changes a run. Unflushed, this
# job's moments held none at step 700, 4,254 at 800 and 15,115 at 900 (counted at a checkpoint every 100 steps).
MINATAR_JOB = """
[job]
seed = 2
total_steps = {total_steps}
threads = 1
flush_denormals = {flush}

[env]
id = "MinAtar/Breakout-v1"

[dqn]
overlap = true
batch_size = 32
learning_starts = 100
train_every = 1
target_update_every = 200
epsilon_end_step = 1_000

[[replay]]
capacity = 2_000

[checkpoint]
every_steps = 0

[log]
every_steps = 100
"""
MINATAR_STEPS = 900


@pytest.fixture
def subnormal_log(tmp_path, monkeypatch) -> Path:
    directory = write_package(tmp_path / "user")
    monkeypatch.setenv("PYTHONPATH", with_python_path(directory))
    log = tmp_path / "subnormal.log"
    monkeypatch.setenv(SUBNORMAL_LOG_VARIABLE, str(log))
    return log


@pytest.mark.parametrize("flush", [True, False])
@pytest.mark.parametrize("algo", ["dqn", "vtrace"])
def test_each_process_that_steps_envs_flushes_subnormals_as_the_job_says(algo, flush, subnormal_log, tmp_path):
    job = tmp_path / f"{algo}.toml"
    text = JOB.format(algo=algo, env_id=SUBNORMAL_ID, package=PACKAGE, num_envs=4, **ALGO_PARTS[algo])
    job.write_text(text.replace("threads = 1\n", f"threads = 1\nflush_denormals = {str(flush).lower()}\n", 1))
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    modes: dict[int, set[bool]] = {}
    for line in subnormal_log.read_text().splitlines():
        pid, flushed, stage = line.split()
        if stage == "run":
            modes.setdefault(int(pid), set()).add(flushed == "1")
    assert len(modes) >= 2, modes  # the worker and its env process, or the two actors
    assert all(flushed == {flush} for flushed in modes.values()), modes


def minatar_run(directory: Path, *, flush: bool, total_steps: int = MINATAR_STEPS) -> tuple[Path, Path]:
    directory.mkdir()
    job = directory / "minatar.toml"
    job.write_text(MINATAR_JOB.format(flush=str(flush).lower(), total_steps=total_steps))
    return job, directory / "run"


def adam_moments(run_dir: Path) -> list[torch.Tensor]:
    """Adam's moments in the run's final checkpoint, parameter by parameter."""
    _, state = load_checkpoint(latest_verified(run_dir).path)
    return [tensor for parameter in state["trainer"]["learner"]["optimizer"]["state"].values()
            for name, tensor in parameter.items() if name in ("exp_avg", "exp_avg_sq")]


def subnormal_count(tensors: list[torch.Tensor]) -> int:
    smallest_normal = torch.finfo(torch.float32).tiny
    return sum(int(((tensor != 0) & (tensor.abs() < smallest_normal)).sum()) for tensor in tensors)


@pytest.fixture(scope="module")
def straight_minatar_runs(tmp_path_factory) -> dict[bool, Path]:
    runs = {}
    for flush in (True, False):
        job, run_dir = minatar_run(tmp_path_factory.mktemp("straight") / f"flush-{flush}", flush=flush)
        result = run_rlsup("run", job, "--run-dir", run_dir)
        assert result.returncode == 0, result.stderr
        runs[flush] = run_dir
    return runs


def test_an_overlapped_learner_process_keeps_no_subnormal_moment_when_flushing(straight_minatar_runs):
    # The gradient steps of an overlapped CPU run are the learner process's: its moments show its mode.
    # (The networks may come out the same: a step of Adam from a subnormal moment is below a weight's last bit.)
    assert subnormal_count(adam_moments(straight_minatar_runs[False])) > 1_000
    assert subnormal_count(adam_moments(straight_minatar_runs[True])) == 0


def test_a_flushing_run_paused_mid_way_resumes_bit_for_bit(straight_minatar_runs, tmp_path):
    job, run_dir = minatar_run(tmp_path / "paused", flush=True)
    pause_then_resume(job, run_dir, train_step=450, total_steps=MINATAR_STEPS)
    assert final_fingerprint(run_dir) == final_fingerprint(straight_minatar_runs[True])
    # The networks' fingerprint cannot tell the modes apart here; the moments can, to the last bit.
    resumed, straight = adam_moments(run_dir), adam_moments(straight_minatar_runs[True])
    assert all(torch.equal(one, other) for one, other in zip(resumed, straight, strict=True))
    assert not all(torch.equal(one, other) for one, other in zip(resumed, adam_moments(straight_minatar_runs[False])))


def test_flushing_is_part_of_what_a_run_is():
    # Measured to keep the networks so far, but not guaranteed to: a run keeps the mode it was started in.
    run = specs.JobSpec()
    judgement = specs.judge(run, run.replace("job", flush_denormals=True))
    assert [change.field for change in judgement.refused] == ["job.flush_denormals"]
    assert judgement.spec.job.flush_denormals is False
    assert "job.flush_denormals: false -> true: defines what the run learns, refused" in \
        specs.refusal_message(list(judgement.refused))
