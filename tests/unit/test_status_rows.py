"""What rows of jobs and experiments show: an ETA only from a measured speed (issue 50 item 12)."""
from __future__ import annotations

from pathlib import Path

from rlsup.jobs.state import State
from rlsup.jobs.store import Job, Store
from rlsup.run.status import Phase, WorkerStatus
from rlsup.views import groups
from rlsup.views.jobs import merge_status


def running(store: Store, name: str, *, total_steps: int = 50_000) -> Job:
    job = store.submit(name=name, spec_path=Path("/nowhere/cp.toml"), run_dir=Path("/nowhere") / name,
                       total_steps=total_steps, experiment="cp")
    store.connection.execute("UPDATE jobs SET state = ?, pid = ? WHERE id = ?", (State.RUNNING.value, 4242 + job.id,
                                                                                job.id))
    return store.job(job.id)


def at(job: Job, step: int, rate: float):
    status = WorkerStatus(pid=job.pid, phase=Phase.RUNNING, step=step, steps_per_second=rate)
    return merge_status(job, status, rate=rate)


def test_no_eta_until_the_speed_is_measured_past_the_warm_up(tmp_path) -> None:
    """Issue 50 item 12: in its first thousand steps (random actions, no updates, 50 times as fast as training)
    an experiment of about 3 minutes said "ETA 49s". A job has an ETA once it has made 5% of its budget, and an
    experiment once every running member has one."""
    with Store(tmp_path) as store:
        early, measured = running(store, "cp-s1"), running(store, "cp-s2")
    assert at(early, 900, 5_000.0).eta_s is None
    assert at(early, 2_500, 250.0).eta_s == (50_000 - 2_500) / 250.0
    group = groups.GroupRow("cp", (at(measured, 10_000, 250.0), at(early, 900, 5_000.0)))
    assert group.eta_s is None  # the early member's steps left are not yet timed
    group = groups.GroupRow("cp", (at(measured, 10_000, 250.0), at(early, 2_500, 250.0)))
    assert group.eta_s == (50_000 - 2_500) / 250.0  # the slower of the two
