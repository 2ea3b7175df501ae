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


def test_an_experiments_job_rows_line_up_whatever_their_names(tmp_path, rlsup_home, capsys) -> None:
    """Issue 50 item 12: `rlsup status EXPERIMENT` wrote each job's row at its own name's length, so the state,
    step and run columns of cp-lr0.001 and cp-lr0.0003 did not line up."""
    from rlsup import client
    from rlsup.cli import main as cli_main
    from rlsup_testing import cartpole_text

    path = tmp_path / "cp.toml"
    path.write_text(cartpole_text(total_steps=12_000) + '\n[sweep]\n"dqn.lr" = [1e-3, 3e-4, 1e-2]\n')
    jobs = client.submit_experiment(path, start_daemon=False)
    with Store(rlsup_home) as store:
        store.update(jobs[1].id, step=9_500)
    capsys.readouterr()
    assert cli_main(["status", "cp"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if any(line.lstrip().startswith(f"{job.id} ") for job in jobs)]
    assert len(rows) == 3, out
    for column in ("queued", "/12,000", "/"):
        assert len({row.index(column) for row in rows}) == 1, (column, rows)
    assert len({row.index(str(rlsup_home)) for row in rows}) == 1, rows
