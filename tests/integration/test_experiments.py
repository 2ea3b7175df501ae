"""Experiments with a real daemon: seeds and [sweep] variants as one group, paused, resumed and edited together."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup import client, paths
from rlsup.run import files as runfiles
from rlsup.jobs.state import State

TOTAL = 4_000
SWEEP = '\n[sweep]\n"dqn.lr" = [1e-4, 3e-4]\n"dqn.hidden_sizes" = [[16], [32, 32]]\n'


def group_line(harness, experiment: str) -> str:
    code, out, _ = harness.cli("list")
    assert code == 0
    return next(line for line in out.splitlines() if line.startswith("exp") and f" {experiment} (" in line)


def test_a_seed_group_pauses_resumes_and_matches_lone_runs_of_its_seeds(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    path = harness.job_file("seeds", total_steps=TOTAL, checkpoint_every=0)
    code, out, err = harness.cli("submit", path, "--seeds", "1-3")
    assert code == 0, err
    ids = [int(line) for line in out.split()]
    jobs = [harness.job(job_id) for job_id in ids]
    assert [job.name for job in jobs] == ["seeds-s1", "seeds-s2", "seeds-s3"]
    assert {job.experiment for job in jobs} == {"seeds"} and len({job.run_dir for job in jobs}) == 3
    assert [runfiles.read_run_spec(Path(job.run_dir)).job.seed for job in jobs] == [1, 2, 3]

    # Two run (cpu_jobs = 2) and one waits: a group pause reaches the workers and the queue alike.
    for job_id in ids[:2]:
        harness.wait_step(job_id, 600)
    code, out, _ = harness.cli("pause", "seeds")
    assert code == 0 and "pause requested for 3 of its 3 jobs" in out, out
    for job_id in ids:
        harness.wait_state(job_id, State.PAUSED, timeout=60)
    assert "3 paused" in group_line(harness, "seeds")
    for job_id in ids[:2]:
        checkpoint = harness.newest_checkpoint(harness.job(job_id).run_dir)
        assert checkpoint.reason == "pause" and 600 <= checkpoint.step < TOTAL

    code, out, _ = harness.cli("resume", "seeds")
    assert code == 0 and "resume requested for 3 of its 3 jobs" in out, out
    finished = [harness.wait_state(job_id, State.DONE) for job_id in ids]
    assert "3 done" in group_line(harness, "seeds")
    assert "one of experiment seeds" in harness.cli("status", str(ids[0]))[1]

    # Lone jobs of the same seeds, run straight, end where the paused group's jobs ended.
    lone = [harness.submit(harness.job_file(f"lone{seed}", seed=seed, total_steps=TOTAL, checkpoint_every=0))
            for seed in (1, 2, 3)]
    straight = [harness.wait_state(job.id, State.DONE) for job in lone]
    grouped = [harness.newest_checkpoint(job.run_dir).fingerprint for job in finished]
    assert len(set(grouped)) == 3
    assert grouped == [harness.newest_checkpoint(job.run_dir).fingerprint for job in straight]

    # One edit of the shared file reaches every job; its seed, which each job holds for itself, reaches none.
    path.write_text(harness.job_text(seed=9, total_steps=TOTAL + 500, checkpoint_every=0))
    for job_id in ids:
        harness.wait_for(lambda job_id=job_id: harness.job(job_id).total_steps == TOTAL + 500, timeout=30,
                         what=f"the edit to reach job {job_id}")
    extended = [harness.wait_state(job_id, State.DONE) for job_id in ids]
    assert [job.step for job in extended] == [TOTAL + 500] * 3
    assert [runfiles.read_run_spec(Path(job.run_dir)).job.seed for job in extended] == [1, 2, 3]
    assert [job.name for job in extended] == ["seeds-s1", "seeds-s2", "seeds-s3"]
    assert not any(harness.events(job_id, "refused") for job_id in ids)


def test_a_sweep_file_queues_variants_times_seeds_with_their_values(harness) -> None:
    harness.settings(cpu_jobs=2)
    harness.start_daemon()
    path = harness.jobs_directory / "grid.toml"
    path.write_text(harness.job_text(total_steps=400, checkpoint_every=0, eval_every=400) + SWEEP)
    code, out, err = harness.cli("submit", path, "--seeds", "1,4", "--experiment", "grid")
    assert code == 0, err
    jobs = [harness.job(int(line)) for line in out.split()]
    assert [job.name for job in jobs] == [
        "grid-lr0.0001-hidden_sizes16-s1", "grid-lr0.0001-hidden_sizes16-s4",
        "grid-lr0.0001-hidden_sizes32x32-s1", "grid-lr0.0001-hidden_sizes32x32-s4",
        "grid-lr0.0003-hidden_sizes16-s1", "grid-lr0.0003-hidden_sizes16-s4",
        "grid-lr0.0003-hidden_sizes32x32-s1", "grid-lr0.0003-hidden_sizes32x32-s4"]
    resolved = [runfiles.read_run_spec(Path(job.run_dir)) for job in jobs]
    assert [(spec.dqn.lr, spec.dqn.hidden_sizes, spec.job.seed) for spec in resolved] == [
        (lr, sizes, seed) for lr in (1e-4, 3e-4) for sizes in ([16], [32, 32]) for seed in (1, 4)]

    for job in jobs:
        harness.wait_state(job.id, State.DONE)
    code, out, _ = harness.cli("status", "grid")
    assert code == 0 and "8 done" in out
    variants = [line.split() for line in out.split("evaluations")[1].splitlines()[2:] if line.strip()]
    assert [cells[:3] for cells in variants] == [
        [f"dqn.lr={lr}", f"dqn.hidden_sizes={sizes}", "2"] for lr in ("0.0001", "0.0003") for sizes in ("16", "32x32")]
    assert all("–" not in cells for cells in variants), out  # every variant was evaluated

    listing = json.loads(harness.cli("list", "--json")[1])
    assert listing[0]["kind"] == "experiment" and listing[0]["jobs"] == [job.id for job in jobs]
    assert listing[0]["states"] == {"done": 8}
    assert [entry["experiment"] for entry in listing[1:]] == ["grid"] * 8

    # The experiment's name is a RUN of rlsup plot: a legend entry per variant, the mean and band of its seeds.
    picture = harness.home / "grid.svg"
    code, _, err = harness.cli("plot", "grid", "--out", str(picture))
    assert code == 0, err
    assert all(f"grid dqn.lr={lr} dqn.hidden_sizes={sizes} (mean of 2, band min–max)" in picture.read_text()
               for lr in ("0.0001", "0.0003") for sizes in ("16", "32x32"))


def test_bad_seeds_and_a_bad_sweep_are_one_line_errors_and_queue_nothing(harness) -> None:
    path = harness.job_file("bad", total_steps=400)
    for seeds, fragment in (("1-x", "'1-x' is not a seed or a range"), ("5-1", "runs backwards"),
                            ("2,2", "seed 2 is given twice")):
        code, out, err = harness.cli("submit", path, "--seeds", seeds)
        assert (code, out) == (2, ""), err
        assert err.count("\n") == 1 and "--seeds" in err and fragment in err, err
    broken = harness.jobs_directory / "broken.toml"
    text = harness.job_text(total_steps=400)
    line = text.count("\n") + 3
    for sweep, fragment in (('"dqn.lrr" = [1e-4]', "unknown field (did you mean 'dqn.lr'?)"),
                            ('"dqn.lr" = 1e-4', "must be a list of values"),
                            ('"dqn.lr" = []', "needs at least one value"),
                            ('"dqn.lr" = [1e-4, -1.0]', "value -1.0 must be greater than 0"),
                            ('"job.total_steps" = [100, 200]', "only identity fields are swept")):
        broken.write_text(text + f"\n[sweep]\n{sweep}\n")
        code, out, err = harness.cli("submit", broken)
        assert (code, out) == (2, ""), err
        assert err.startswith(f"{broken}:{line}: sweep.") and fragment in err, err
        assert harness.cli("validate", broken)[0] == 2
    assert harness.store.jobs() == []


def test_more_seeds_join_an_experiment_and_a_copy_drives_a_whole_new_one(harness) -> None:
    path = harness.job_file("more", total_steps=400)
    first = client.submit_experiment(path, seeds=(1, 2), home=harness.home, start_daemon=False)
    with pytest.raises(client.NameTaken, match="experiment more already has job more-s2"):
        client.submit_experiment(path, seeds=(2, 3), home=harness.home, start_daemon=False)
    with pytest.raises(client.FileAlreadyBound, match="--copy"):
        harness.submit(path)  # a lone job from the experiment's file must say it is meant
    added = client.submit_experiment(path, seeds=(3,), home=harness.home, start_daemon=False)
    assert [job.name for job in first + added] == ["more-s1", "more-s2", "more-s3"]
    assert {job.experiment for job in harness.store.jobs()} == {"more"}

    copied = client.submit_experiment(path, seeds=(1, 2), experiment="other", copy=True, home=harness.home,
                                      start_daemon=False)
    copy = Path(copied[0].run_dir) / paths.SOURCE_COPY
    assert [job.spec_path for job in copied] == [str(copy)] * 2 and copy.read_bytes() == path.read_bytes()
    assert [job.name for job in harness.store.experiment_jobs("other")] == ["other-s1", "other-s2"]
