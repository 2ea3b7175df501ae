"""Seeds added to an experiment that decides, as a user adds them: one seed joins as two do (issue 49 item 18)."""
from __future__ import annotations

ASHA = '\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.5\n'


def test_one_more_seed_joins_a_deciding_experiment_as_two_do(harness) -> None:
    """Issue 49 item 18: `--seeds 3 --experiment e` was refused ("submit it with --seeds 1-4", which the
    experiment's own names then refuse) where `--seeds 3-4` was accepted: the count of members the [scheduler]
    decides among left out those the experiment already has."""
    harness.settings(cpu_jobs=0)  # the daemon a submit starts trains nothing: the queue is what is tested
    path = harness.job_file("e", total_steps=1_800, checkpoint_every=0)
    path.write_text(path.read_text() + ASHA)
    for seeds in ("1-2", "3", "4-5"):
        code, _, err = harness.cli("submit", path, "--seeds", seeds, "--experiment", "e")
        assert code == 0, err
    assert [job.name for job in harness.store.experiment_jobs("e")] == [f"e-s{seed}" for seed in range(1, 6)]

    # A new experiment of one seed has nothing to decide among: refused with advice that fits it.
    code, out, err = harness.cli("submit", path, "--seeds", "7", "--experiment", "fresh")
    assert (code, out) == (2, ""), err
    assert f"{path}:" in err and "--seeds 1-4" in err and "--experiment" in err, err
    assert harness.store.experiment_jobs("fresh") == []
