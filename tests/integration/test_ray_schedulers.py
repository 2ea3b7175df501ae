"""ASHA with its members on a real Ray head: each pauses at the rung on the cluster, and only the best goes on."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs import standings
from rlsup.jobs.state import State

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ray_head import lab_daemon  # noqa: E402  (tests/, beside rlsup_testing)

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
