"""Which spec changes a fork may make, the refusal advice built from them, and lineage chains of parent.json files."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rlsup.run import lineage
from rlsup import atomic
from rlsup import spec as specs

PARENT = specs.loads('[job]\nseed = 3\ntotal_steps = 10_000\n[dqn]\nhidden_sizes = [32, 32]\nnetwork = "mlp"\n'
                     '[[replay]]\ncapacity = 5_000\n', default_name="parent")


def changed(section: str, **fields) -> specs.JobSpec:
    return PARENT.replace(section, **fields)


@pytest.mark.parametrize("fork", [
    changed("dqn", lr=5e-3), changed("dqn", gamma=0.9, epsilon_end=0.05, batch_size=64, learning_starts=0),
    changed("dqn", network="auto"), changed("job", total_steps=99_000, name="other"),
    PARENT.replace("checkpoint", keep=9), dataclasses.replace(PARENT, replay=(
        dataclasses.replace(PARENT.replay[0], ratio=1.0, min_size=100),))])
def test_a_fork_may_change_what_training_does_next(fork: specs.JobSpec) -> None:
    assert lineage.compatibility_problem(PARENT, fork, replay=True) is None


@pytest.mark.parametrize("fork, replay, problem", [
    (changed("job", algo="vtrace"), True, "job.algo differs from the parent's \"dqn\""),
    (changed("env", num_envs=2), True, "env.num_envs differs from the parent's 1"),
    (changed("env", id="Acrobot-v1"), False, "env.id differs from the parent's \"CartPole-v1\""),
    (changed("job", seed=4), True, "job.seed differs from the parent's 3: a fork continues"),
    (changed("dqn", hidden_sizes=[64]), False, "dqn.hidden_sizes differs from the parent's [32, 32]: the networks"),
    (dataclasses.replace(PARENT, replay=(dataclasses.replace(PARENT.replay[0], capacity=9),)), True,
     "replay[0].capacity differs from the parent's 5000: its replay cannot be loaded; fork with --no-replay"),
    (dataclasses.replace(PARENT, replay=PARENT.replay * 2), True, "replay has 2 tables, the parent's 1"),
])
def test_a_fork_keeps_what_the_checkpoint_was_made_for(fork: specs.JobSpec, replay: bool, problem: str) -> None:
    assert lineage.compatibility_problem(PARENT, fork, replay=replay).startswith(problem)


def test_a_replay_of_another_shape_is_fine_when_it_stays_behind() -> None:
    fork = dataclasses.replace(PARENT, replay=(dataclasses.replace(PARENT.replay[0], capacity=9),))
    assert lineage.compatibility_problem(PARENT, fork, replay=False) is None
    assert lineage.fork_advice(7, "/jobs/a b.toml", PARENT, fork) == (
        "to train with it from this run's newest checkpoint, with an empty replay: "
        "rlsup fork 7 --checkpoint latest --no-replay '/jobs/a b.toml'")


def test_another_optimizer_needs_a_fresh_one_and_the_advice_says_so() -> None:
    """The optimizer's state is for its kind; its settings (rmsprop_centered, alpha, eps) may change freely."""
    rmsprop = changed("dqn", optimizer="rmsprop")
    assert lineage.compatibility_problem(PARENT, rmsprop, replay=True).startswith(
        'dqn.optimizer differs from the parent\'s "adam": the saved optimizer state is for it; fork with '
        "--fresh-optimizer")
    assert lineage.compatibility_problem(PARENT, rmsprop, replay=True, fresh_optimizer=True) is None
    assert lineage.compatibility_problem(rmsprop, changed("dqn", optimizer="rmsprop", rmsprop_centered=False,
                                                          rmsprop_alpha=0.99), replay=True) is None
    assert lineage.fork_advice(7, "/jobs/a.toml", PARENT, rmsprop) == (
        "to train with it from this run's newest checkpoint, with a fresh optimizer: "
        "rlsup fork 7 --checkpoint latest --fresh-optimizer /jobs/a.toml")
    both = dataclasses.replace(rmsprop, replay=(dataclasses.replace(PARENT.replay[0], capacity=9),))
    assert lineage.fork_advice(7, "/jobs/a.toml", PARENT, both) == (
        "to train with it from this run's newest checkpoint, with an empty replay and a fresh optimizer: "
        "rlsup fork 7 --checkpoint latest --no-replay --fresh-optimizer /jobs/a.toml")


def record(run_dir: Path, parent_run: Path, name: str, step: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    parent = lineage.Parent(run_dir=str(parent_run), job_name=name, job_id=None, step=step, checkpoint="c",
                            reason="final", fingerprint="f" * 64, fresh_optimizer=False, replay=False, time=0.0,
                            rlsup_version="0")
    atomic.write_json(run_dir / lineage.PARENT_FILE, dataclasses.asdict(parent))


def test_the_lineage_follows_parents_and_stops_at_a_cycle(tmp_path: Path) -> None:
    root, middle, leaf = (tmp_path / name for name in ("root", "middle", "leaf"))
    record(middle, root, "root", 100)
    record(leaf, middle, "middle", 200)
    assert lineage.lineage_line(leaf) == "root at step 100 → middle at step 200 → this"
    assert lineage.lineage_line(root) is None
    record(root, leaf, "leaf", 300)  # made by hand: a cycle must end, not loop
    assert len(lineage.ancestors(leaf)) == 3
    (middle / lineage.PARENT_FILE).write_text("{not json")
    assert lineage.read_parent(middle) is None and lineage.ancestors(leaf)[0].step == 200
