"""ASHA and PBT with their members on a real Ray head: stopped members pause on the cluster, forks run there."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import entry_of, list_checkpoints
from rlsup.jobs import standings
from rlsup.jobs.state import State
from rlsup.run import files as runfiles
from rlsup.paths import INHERITED_CHECKPOINT
from rlsup.run.lineage import read_parent

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ray_head import lab_daemon  # noqa: E402  (tests/, beside rlsup_testing)
from test_pbt import SCHEDULER as PBT, settled, submit  # noqa: E402  (beside this file)

TOTAL, RUNG = 1_200, 600
SCHEDULER = f'\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [{RUNG}]\nkeep = 0.5\n'


@pytest.mark.slow  # a Ray head and an experiment through a daemon
def test_asha_members_on_the_cluster_pause_at_the_rung_and_only_the_best_goes_on(harness, ray_head,
                                                                                  tmp_path: Path) -> None:
    run_root = lab_daemon(harness, ray_head.address, tmp_path / "cluster-runs")
    path = harness.job_file("asha", total_steps=TOTAL, checkpoint_every=0)
    path.write_text(path.read_text().replace("[job]\n", '[job]\ncluster = "lab"\n', 1) + SCHEDULER)
    code, out, err = harness.cli("submit", path, "--seeds", "1-2", "--experiment", "asha-lab")
    assert code == 0, err
    ids = [int(line) for line in out.split()]

    def settled():
        jobs = [harness.job(job_id) for job_id in ids]
        return jobs if all(job.state is State.DONE or (job.state is State.PAUSED and "stopped by ASHA" in job.reason)
                           for job in jobs) else None

    jobs = harness.wait_for(settled, timeout=240, what="one member done, the other stopped",
                            report=lambda: harness.report())
    assert all(Path(job.run_dir).parent == run_root and job.cluster == "lab" for job in jobs)
    held = standings.standings(harness.store, ids)
    values = {job_id: held[job_id][0].values["eval_return"] for job_id in ids}
    assert all(held[job_id][0].step == RUNG for job_id in ids), held
    # Both paused at the rung with a checkpoint there, on the cluster's run_root.
    for job in jobs:
        assert RUNG in [entry.step for entry in list_checkpoints(Path(job.run_dir))]
    best = min(ids, key=lambda job_id: (-values[job_id], job_id))
    done = harness.job(best)
    assert done.state is State.DONE and done.step == TOTAL, harness.report(best)
    (stopped,) = [harness.job(job_id) for job_id in ids if job_id != best]
    assert stopped.state is State.PAUSED and stopped.step == RUNG
    assert stopped.reason.startswith("stopped by ASHA at rung 1: eval_return ") and "(kept: top 1)" in stopped.reason


PBT_TOTAL, INTERVAL = 1_000, 500  # one generation of test_pbt.py's scheduler


@pytest.mark.slow  # a Ray head and an experiment through a daemon
def test_pbt_forks_the_weakest_member_on_the_cluster_from_a_strong_ones_checkpoint(harness, ray_head,
                                                                                    tmp_path: Path) -> None:
    run_root = lab_daemon(harness, ray_head.address, tmp_path / "cluster-runs")
    path = harness.job_file("pbt", total_steps=PBT_TOTAL, checkpoint_every=0, lr="1e-3")
    path.write_text(path.read_text().replace("[job]\n", '[job]\ncluster = "lab"\n', 1) + PBT)
    submit(harness, path, "pbt-lab")
    jobs = settled(harness, "pbt-lab", generations=1)
    # The fork is made on the cluster's run_root and runs there, like the members it joins.
    assert all(Path(job.run_dir).parent == run_root and job.cluster == "lab" for job in jobs), harness.report()
    (fork,) = [job for job in jobs if read_parent(Path(job.run_dir)) is not None]
    parent = read_parent(Path(fork.run_dir))
    assert parent.step == INTERVAL and Path(parent.run_dir).parent == run_root
    # It starts from the parent's checkpoint at the generation's step: the same weights, bit for bit.
    parent_checkpoint = next(entry for entry in list_checkpoints(Path(parent.run_dir)) if entry.step == INTERVAL)
    assert parent.fingerprint == parent_checkpoint.fingerprint
    inherited = entry_of(Path(fork.run_dir) / INHERITED_CHECKPOINT)
    assert (inherited.step, inherited.fingerprint) == (INTERVAL, parent.fingerprint)
    assert fork.state is State.DONE and fork.step == PBT_TOTAL, harness.report(fork.id)
    lr, parent_lr = (runfiles.read_run_spec(Path(run)).dqn.lr for run in (fork.run_dir, parent.run_dir))
    assert any(abs(lr - parent_lr * factor) < 1e-12 for factor in (0.8, 1.25)), (lr, parent_lr)
    (replaced,) = [job for job in jobs if job.state is State.PAUSED]
    assert replaced.step == INTERVAL and ": pbt: member " in replaced.reason, replaced.reason
