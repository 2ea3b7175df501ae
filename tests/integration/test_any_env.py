"""Any Gymnasium env: refused at validate and submit when its spaces cannot train, else trained (MinAtar,
LunarLander, a user's own package named in [env] imports), its network recorded in the run's job.toml."""
from __future__ import annotations

import dataclasses
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch
from checkpoint_testing import flip_last_byte
from rlsup_testing import assert_one_line_error, rlsup_command, run_rlsup
from user_envs import DICT_ID, PACKAGE, WALK_ID, with_python_path, write_package

from rlsup import client, spec as specs
from rlsup.run import files as runfiles
from rlsup.run.exit import read_exit
from rlsup.run.status import read_worker_status
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.worker.training import build_trainer

JOBS = Path(__file__).parents[2] / "jobs"

WALK_JOB = """
[job]
seed = 4
total_steps = 600
threads = 1

[env]
id = "{env_id}"
imports = ["{package}"]

[dqn]
batch_size = 16
learning_starts = 100
train_every = 4
target_update_every = 100
hidden_sizes = [16]
epsilon_end_step = 400

[[replay]]
capacity = 1_000

[checkpoint]
every_steps = 0

[log]
every_steps = 100
"""


def job_file(directory: Path, env_id: str, name: str = "job") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(WALK_JOB.format(env_id=env_id, package=PACKAGE))
    return path


def id_line(path: Path) -> int:
    return next(number for number, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("id ="))


@pytest.fixture
def user_envs(tmp_path, monkeypatch):
    """The package on PYTHONPATH for the processes tests start, and on sys.path for this one."""
    directory = write_package(tmp_path / "user")
    monkeypatch.setenv("PYTHONPATH", with_python_path(directory))
    monkeypatch.syspath_prepend(str(directory))
    return directory


def test_validate_and_submit_refuse_a_space_rlsup_cannot_train(user_envs, tmp_path, rlsup_home):
    env_id, space = DICT_ID, "observation space Dict('position': Box("
    path = job_file(tmp_path, env_id)
    assert_one_line_error(run_rlsup("validate", path), 2, f"{path}:{id_line(path)}: env.id:", f"'{env_id}'", space)
    assert_one_line_error(run_rlsup("submit", path), 2, f"{path}:{id_line(path)}: env.id:", space)
    with pytest.raises(specs.SpecError, match=space.replace("(", r"\(").replace(")", r"\)")):
        client.submit(path, home=rlsup_home, start_daemon=False)
    with Store(rlsup_home) as store:
        assert store.jobs() == []


def test_validate_and_submit_refuse_an_algorithm_that_does_not_train_the_envs_actions(user_envs, tmp_path,
                                                                                       rlsup_home):
    """Pendulum's Box actions train with sac (and continuous V-trace); this job file's dqn is refused at the
    line that names it, or at its [job] table where the algorithm is the default, with the algorithms that fit."""
    path = job_file(tmp_path, "Pendulum-v1")
    table = path.read_text().splitlines().index("[job]") + 1
    for command in ("validate", "submit"):
        assert_one_line_error(run_rlsup(command, path), 2, f"{path}:{table}: job.algo:",
                              "'Pendulum-v1' has continuous actions",
                              "algo 'dqn' trains discrete ones", '"sac"')
    with Store(rlsup_home) as store:
        assert store.jobs() == []


def test_submit_records_the_network_auto_resolved_to(tmp_path, rlsup_home):
    job = client.submit(JOBS / "minatar-breakout-dqn.toml", home=rlsup_home, start_daemon=False, copy=True)
    recorded = runfiles.read_run_spec(Path(job.run_dir))
    assert recorded.dqn.network == "small_cnn" and specs.load(JOBS / "minatar-breakout-dqn.toml").dqn.network == "auto"
    # The file, still saying "auto", asks for nothing the run does not already do.
    assert specs.diff(recorded, specs.load(JOBS / "minatar-breakout-dqn.toml")) == []


def test_validate_names_the_network_of_a_user_env(user_envs, tmp_path):
    result = run_rlsup("validate", job_file(tmp_path, WALK_ID))
    assert result.returncode == 0, result.stderr
    assert "vector 2 float32 observations, 2 actions, network mlp" in result.stdout


def test_a_user_env_package_named_in_imports_trains(user_envs, tmp_path):
    run_dir = tmp_path / "run"
    result = run_rlsup("run", job_file(tmp_path, WALK_ID), "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr + (run_dir / "worker.log").read_text()
    assert read_exit(run_dir).step == 600
    episodes = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "episode"]
    assert episodes and all(record["return"] == 1.0 for record in episodes if record["length"] < 20)


SMOKE_JOBS = ["minatar-breakout-dqn.toml", "minatar-breakout-vtrace.toml", "lunarlander-dqn.toml"]


@pytest.mark.parametrize("name", SMOKE_JOBS)
def test_an_example_env_trains_a_few_hundred_steps(name):
    """The trainer itself, in this process: observations in their layout reach the network it chose."""
    torch.set_num_threads(1)
    trainer = build_trainer(shrunk(specs.load(JOBS / name)), torch.device("cpu"))
    try:
        while trainer.step < 400:
            trainer.iterate()
        metrics = trainer.train_metrics()
        assert trainer.episodes > 0 and metrics["updates"] > 0, metrics
        assert all(math.isfinite(value) for value in metrics.values() if isinstance(value, float)), metrics
    finally:
        trainer.close()


def shrunk(spec: specs.JobSpec) -> specs.JobSpec:
    """Replays of a few thousand items, updates from step 100, V-trace in one process on small batches."""
    replays = tuple(dataclasses.replace(replay, capacity=min(replay.capacity, 2_000), min_size=min(replay.min_size, 64))
                    if replay.kind != "queue" else replay for replay in spec.replay)
    spec = dataclasses.replace(spec, replay=replays)
    spec = spec.replace("dqn", learning_starts=min(spec.dqn.learning_starts, 100),
                        epsilon_end_step=min(spec.dqn.epsilon_end_step, 200), train_every=4, gradient_steps=1)
    return spec.replace("vtrace", serial=True, envs_per_actor=2, unroll_length=10, batch_size=4)


def test_a_resume_after_the_users_env_changed_its_space_is_one_sentence(user_envs, tmp_path):
    """A package upgraded between pause and resume gives observations the checkpoint's networks do not take:
    refused in one sentence naming the checkpoint (exit 2, never retried), no traceback, no checkpoint lost."""
    run_dir = tmp_path / "run"
    job = job_file(tmp_path, WALK_ID)
    job.write_text(job.read_text().replace("every_steps = 0", "every_steps = 300", 1))
    assert run_rlsup("run", job, "--run-dir", run_dir).returncode == 0
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    source = user_envs / PACKAGE / "__init__.py"
    source.write_text(source.read_text().replace('observation_space = Box(0.0, 1.0, (2,), np.float32)',
                                                 'observation_space = Box(0.0, 1.0, (3,), np.float32)', 1)
                      .replace("1.0], np.float32)", "1.0, 0.0], np.float32)", 1))
    job.write_text(job.read_text().replace("total_steps = 600", "total_steps = 900"))
    flip_last_byte(run_dir / "checkpoints" / "step-000000000600" / "tensors.pt")  # the newest is skipped too
    result = run_rlsup("run", "--resume", run_dir, job)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "step-000000000300" in last and "torso.layers.0.weight" in last and "observation or action space" in last
    assert sorted(path.name for path in (run_dir / "checkpoints").iterdir()) == checkpoints
    assert read_exit(run_dir).code == 2
    # Both facts stay where `rlsup status` and the TUI read them: the skipped newer checkpoint and the failure.
    status = read_worker_status(run_dir)
    assert status.phase == "failed" and "step-000000000600" in status.notice


def test_a_package_on_the_submitting_shells_python_path_is_found_by_the_daemons_worker(harness, tmp_path):
    """validate and submit import [env] imports where the user's shell finds them; the worker, started by a
    daemon that runs without that PYTHONPATH, used to fail with "cannot import". Submit records where each
    was found outside the interpreter's own directories, and the worker, enjoy and export look there too."""
    directory = write_package(tmp_path / "user")
    harness.start_daemon()  # from this process's environment, which lacks the package
    job = job_file(tmp_path, WALK_ID)
    submitted = subprocess.run(rlsup_command("submit", job), capture_output=True, text=True, timeout=120,
                               env={**os.environ, "RLSUP_HOME": str(harness.home),
                                    "PYTHONPATH": with_python_path(directory)})
    assert submitted.returncode == 0, submitted.stderr
    job_id = int(submitted.stdout.split()[0])
    ended = harness.wait_state(job_id, State.DONE, State.FAILED)
    assert ended.state is State.DONE, harness.report(job_id)
    run_dir = harness.job(job_id).run_dir
    played = run_rlsup("enjoy", run_dir, "--episodes", "1")  # a shell without it, too
    assert played.returncode == 0, played.stderr
    longer = tmp_path / "longer.toml"
    longer.write_text(job.read_text().replace("total_steps = 600", "total_steps = 700"))
    forked = run_rlsup("fork", run_dir, longer, "--name", "walk-fork")  # and the fork it queues
    assert forked.returncode == 0, forked.stderr
    fork_id = int(forked.stdout.split()[0])
    assert harness.wait_state(fork_id, State.DONE, State.FAILED).state is State.DONE, harness.report(fork_id)
