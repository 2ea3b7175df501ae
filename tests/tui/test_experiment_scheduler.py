"""The experiment pane and jobs table of an ASHA experiment follow its rungs as members report and are decided, and
the pane says when its scheduler has finished."""
from __future__ import annotations

import pytest

from rlsup_testing import cartpole_job

from rlsup import client
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable, group_key
from rlsup.views.decisions import read_scheduler_view, scheduler_lines

from test_experiment_pane import SIZE, pane_text, plain

SCHEDULER = '\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.5\n'


def stored(home):
    with Store(home) as store:
        jobs = store.experiment_jobs("asha")
        view = read_scheduler_view(store, "asha", jobs)
        return jobs, scheduler_lines(view) if view is not None else []


def state_cell(table: JobsTable, job_id: int) -> str:
    return plain(table.get_row(str(job_id))[table.get_column_index("state")]).strip()


@pytest.mark.slow  # whole experiments through a daemon: their files start first
async def test_the_pane_and_the_table_show_each_rung_as_members_report_and_are_decided(daemon_home, tmp_path,
                                                                                      wait_until):
    path = cartpole_job(tmp_path, name="asha", total_steps=1_800, checkpoint_every=0)
    path.write_text(path.read_text() + SCHEDULER)
    jobs = client.submit_experiment(path, seeds=(1, 2, 3, 4), home=daemon_home, start_daemon=False)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "asha" in table.groups_shown, what="the group row")
        table.move_cursor(row=table.get_row_index(group_key("asha")))
        # Before any member trains: the scheduler's heading, and no rung yet.
        await wait_until(pilot, lambda: "ASHA on eval_return" in pane_text(app), what="the scheduler's heading",
                         report=lambda: pane_text(app))
        assert "rung 1 at 600" not in pane_text(app)

        client.ensure_daemon(daemon_home)
        over = lambda: all(job.state is State.DONE or "stopped by ASHA" in job.reason  # noqa: E731
                           for job in stored(daemon_home)[0])
        await wait_until(pilot, over, timeout=300, what="every member done or stopped", report=lambda: pane_text(app))
        _, lines = stored(daemon_home)
        assert "rung 2 at 1,200: 2 reported" in "\n".join(lines)
        # The pane says what `rlsup status asha` says once the last decision is in: each rung, each member with its
        # figure and verdict, and the outcome (issue 50 item 4, through a real daemon).
        rung_rows = [line.split() for line in lines if line.split()[2:3] == ["eval_return"]]
        shown = lambda: [line.split() for line in pane_text(app).splitlines()]  # noqa: E731
        await wait_until(pilot, lambda: all([row[0], row[1], row[3], row[4]] in shown() for row in rung_rows),
                         timeout=30, what="the pane's rungs equal the store's", report=lambda: pane_text(app))
        assert sorted(row[-1] for row in rung_rows) == ["promoted"] * 3 + ["stopped"] * 3, lines
        with Store(daemon_home) as store:
            outcome = read_scheduler_view(store, "asha", store.experiment_jobs("asha")).outcome
        assert outcome.finished and outcome.best is not None, outcome
        await wait_until(pilot, lambda: outcome.sentence() in " ".join(pane_text(app).split()), timeout=30,
                         what="the pane saying the experiment is finished", report=lambda: pane_text(app))
        assert outcome.sentence().startswith(f"finished: ASHA decided every rung; best job {outcome.best.member} ")

        await pilot.press("right")
        await wait_until(pilot, lambda: jobs[0].id in table.rows_shown, what="the group opened")
        marks = {job.id: state_cell(table, job.id) for job in jobs}
        assert sorted(mark.split(":", 1)[-1].strip() for mark in marks.values() if "stopped" in mark) == \
            ["stopped at rung 1", "stopped at rung 1", "stopped at rung 2"], marks
