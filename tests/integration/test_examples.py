"""Every job in jobs/ runs as written, with its budget and sizes shrunk (STYLE point 10)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rlsup.run import files as runfiles
from rlsup.run.exit import read_exit
from rlsup import spec as specs
from rlsup_testing import run_rlsup

JOBS = sorted((Path(__file__).parents[2] / "jobs").glob("*.toml"))


def shrink(spec: specs.JobSpec) -> specs.JobSpec:
    """The same job with a budget of a few hundred steps and replays of a few hundred items."""
    small_replays = tuple(dataclasses.replace(replay, capacity=min(replay.capacity, 300),
                                              min_size=min(replay.min_size, 20) if replay.min_size else 0,
                                              anneal_steps=min(replay.anneal_steps, 200))
                          for replay in spec.replay)
    spec = dataclasses.replace(spec, replay=small_replays)
    spec = spec.replace("job", total_steps=min(spec.job.total_steps, 400), device="cpu", gpus=0)
    spec = spec.replace("dqn", learning_starts=min(spec.dqn.learning_starts, 64),
                        epsilon_end_step=min(spec.dqn.epsilon_end_step, 200))
    spec = spec.replace("vtrace", actors=min(spec.vtrace.actors, 2), envs_per_actor=min(spec.vtrace.envs_per_actor, 2),
                        unroll_length=min(spec.vtrace.unroll_length, 10))
    spec = spec.replace("sac", learning_starts=min(spec.sac.learning_starts, 64),
                        batch_size=min(spec.sac.batch_size, 32))
    spec = spec.replace("checkpoint", every_steps=200).replace("log", every_steps=100)
    return spec.replace("eval", every_steps=0)


@pytest.mark.parametrize("job_file", JOBS, ids=lambda path: path.stem)
def test_example_job_runs_shrunk(job_file: Path, tmp_path: Path) -> None:
    spec = shrink(specs.load(job_file))
    shrunk = tmp_path / job_file.name
    shrunk.write_text(spec.to_toml())
    run_dir = tmp_path / "run"
    result = run_rlsup("run", shrunk, "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr + (run_dir / "worker.log").read_text()
    assert read_exit(run_dir).step >= spec.job.total_steps
    kinds = {record["kind"] for record in runfiles.read_metrics(run_dir)}
    assert {"train", "checkpoint"} <= kinds
    # An untrained greedy policy ends its game too: fire_reset serves Breakout's ball after every life.
    played = run_rlsup("enjoy", run_dir, "--episodes", "1", "--json")
    assert played.returncode == 0, played.stderr
    assert len(json.loads(played.stdout)["returns"]) == 1


@pytest.mark.parametrize("job_file", JOBS, ids=lambda path: path.stem)
def test_example_elite_lambda_anneals_within_its_budget(job_file: Path) -> None:
    spec = specs.load(job_file)
    for replay in spec.replay:
        if replay.kind in ("elite", "attentive"):
            assert replay.anneal_steps * replay.alpha_annealing_factor <= spec.job.total_steps, replay
