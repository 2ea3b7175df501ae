"""PBT through a real daemon: each generation the weakest member is replaced by a fork of a strong one, the same way
twice, and the same way again when the daemon is SIGKILLed at its decisions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs import standings
from rlsup.jobs.state import State
from rlsup.run import files as runfiles
from rlsup.run.lineage import read_parent

TOTAL, INTERVAL = 1_500, 500
SCHEDULER = ('\n[scheduler]\nkind = "pbt"\nmetric = "eval_return"\ninterval = 500\nquantile = 0.25\n'
             'perturb = { "dqn.lr" = [0.8, 1.25] }\n')


def submit(harness, path: Path, experiment: str) -> None:
    code, _, err = harness.cli("submit", path, "--seeds", "1-4", "--experiment", experiment)
    assert code == 0, err


def settled(harness, experiment: str, generations: int = 2) -> list:
    """Every member of 4 done, or replaced by a fork and paused for good: one replaced each generation."""
    def over():
        jobs = harness.store.experiment_jobs(experiment)
        done = [job for job in jobs if job.state is State.DONE]
        replaced = [job for job in jobs if job.state is State.PAUSED and job.reason.startswith("replaced at")]
        return jobs if len(done) == 4 and len(replaced) == generations and len(jobs) == 4 + generations else None
    return harness.wait_for(over, timeout=300, what=f"experiment {experiment} over", report=lambda: harness.report())


def decisions_of(harness, experiment: str) -> list:
    return standings.decisions(harness.store, [job.id for job in harness.store.experiment_jobs(experiment)])


def lineage(harness, jobs: list) -> list[tuple]:
    """(step, verdict, seed of the member, lr) of every decision: what a replay of the experiment must repeat."""
    seed_of = {job.id: runfiles.read_run_spec(Path(job.run_dir)).job.seed for job in jobs}
    lr_of = {job.id: runfiles.read_run_spec(Path(job.run_dir)).dqn.lr for job in jobs}
    return sorted((decision.step, decision.verdict, seed_of[decision.job_id], lr_of[decision.job_id])
                  for decision in standings.decisions(harness.store, [job.id for job in jobs]))


@pytest.mark.slow  # whole experiments through a daemon: their files start first
def test_each_generation_forks_the_weakest_from_a_strong_member_the_same_way_twice(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    path = harness.job_file("pbt", total_steps=TOTAL, checkpoint_every=0, lr="1e-3")
    path.write_text(path.read_text() + SCHEDULER)
    submit(harness, path, "pbt-a")
    submit(harness, path, "pbt-b")
    # The second experiment's daemon is SIGKILLed as each generation's first decision is recorded.
    for count in (1, 6):
        harness.wait_for(lambda: len(decisions_of(harness, "pbt-b")) >= count, timeout=240,
                         what=f"{count} decisions of pbt-b", report=lambda: harness.report())
        harness.kill_daemon()
        harness.start_daemon()
    first, second = settled(harness, "pbt-a"), settled(harness, "pbt-b")
    # Every directory a generation made is a job's, and none is left recorded as unfinished.
    made = {path for path in Path(first[0].run_dir).parent.iterdir() if path.name.startswith(("pbt-a", "pbt-b"))}
    assert made == {Path(job.run_dir) for job in first + second}
    assert not harness.store.connection.execute("SELECT * FROM unfinished_forks").fetchall()

    for jobs in (first, second):
        by_id = {job.id: job for job in jobs}
        forks = [job for job in jobs if read_parent(Path(job.run_dir)) is not None]
        assert len(forks) == 2
        for fork in forks:
            parent = read_parent(Path(fork.run_dir))
            step = parent.step
            assert step in (INTERVAL, 2 * INTERVAL)
            # Its first checkpoint is the parent's at the generation's step: the same weights, bit for bit.
            parent_checkpoint = next(entry for entry in list_checkpoints(Path(parent.run_dir)) if entry.step == step)
            assert parent.fingerprint == parent_checkpoint.fingerprint
            # Its lr is its parent's times one of the factors, pinned over the file.
            lr, parent_lr = (runfiles.read_run_spec(Path(run)).dqn.lr for run in (fork.run_dir, parent.run_dir))
            assert any(abs(lr - parent_lr * factor) < 1e-12 for factor in (0.8, 1.25)), (lr, parent_lr)
            assert json.loads(fork.overrides)["dqn.lr"]["value"] == lr
            # The events name both members, the step and the values.
            event = [event.message for event in harness.events(fork.id, "decision")][0]  # its first: oldest first
            assert f"forks member {parent.job_id} " in event and f"at step {step:,} with dqn.lr " in event, event
            assert by_id[fork.id].state is State.DONE and by_id[fork.id].step == TOTAL
        replaced = [job for job in jobs if job.state is State.PAUSED]
        assert sorted(job.step for job in replaced) == [INTERVAL, 2 * INTERVAL]
        assert all(job.reason.startswith("replaced at generation ") and ": pbt: member " in job.reason
                   for job in replaced), [job.reason for job in replaced]
        code, out, _ = harness.cli("list")
        assert out.count("paused: replaced at generation 1") == 2 and out.count("replaced at generation 2") == 2, out
        code, out, _ = harness.cli("status", jobs[0].experiment)
        assert "PBT on eval_return, every 500 steps" in out and "generation 2 at 1,000: 4 reported" in out, out
    # The same decisions, each once, whatever the daemon went through.
    assert lineage(harness, first) == lineage(harness, second)
    assert len(decisions_of(harness, "pbt-b")) == len({(d.job_id, d.step) for d in decisions_of(harness, "pbt-b")})

    # `rlsup plot` draws one line a member: a fork's begins with its parent's metrics, so lineages connect.
    from rlsup.cli.plot import read_lines, resolve_groups
    groups = resolve_groups(["pbt-a"])
    assert sorted(group.label for group in groups) == sorted(job.name for job in first)
    fork = next(job for job in first if read_parent(Path(job.run_dir)) is not None)
    parent = read_parent(Path(fork.run_dir))
    lines = {line.label: line for line in read_lines(groups, "return", 0.0)}
    fork_line, parent_line = lines[fork.name], lines[next(job.name for job in first if job.id == parent.job_id)]
    before = [(step, value) for step, value in zip(fork_line.steps, fork_line.values) if step <= parent.step]
    assert before and before == [(step, value) for step, value in zip(parent_line.steps, parent_line.values)
                                 if step <= parent.step]
