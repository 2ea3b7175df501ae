"""An experiment in the jobs table: one group row that opens on its jobs, counts their states, takes group intents and marks."""
from __future__ import annotations

from rlsup_testing import screen_shown

from rlsup import client, paths
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import Desired
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable, group_key
from rlsup.tui.screens import ConfirmScreen


def group_state(table: JobsTable, experiment: str) -> str:
    key = group_key(experiment)
    return table.get_cell(key, "state").plain if key in table.cells_shown else ""


def report(home) -> str:
    with Store(home) as store:
        return "\n".join(f"job {job.id} {job.name}: {job.state} ({job.reason})" for job in store.jobs())


async def test_a_group_row_opens_counts_its_jobs_and_pauses_and_kills_them_all(daemon_home, job_file, wait_until):
    (daemon_home / paths.DAEMON_SETTINGS).write_text((daemon_home / paths.DAEMON_SETTINGS).read_text()
                                                     + "cpu_jobs = 1\n")
    jobs = client.submit_experiment(job_file("seeds"), seeds=(1, 2, 3), home=daemon_home)
    first, second, third = (job.id for job in jobs)
    lone = client.submit(job_file("lone"), home=daemon_home)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(JobsTable)
        explain = lambda: report(daemon_home) + f"\nshown: {sorted(table.cells_shown)}"  # noqa: E731
        await wait_until(pilot, lambda: group_state(table, "seeds") == "1 running 2 queued",
                         what="the group row counting one running and two queued", report=explain)
        assert lone.id in table.rows_shown and first not in table.rows_shown  # closed: its jobs are not listed
        assert table.group_job_ids(group_key("seeds")) == (first, second, third)
        assert table.group_job_ids(str(lone.id)) == (lone.id,)

        table.move_cursor(row=table.get_row_index(group_key("seeds")))
        await pilot.press("right")
        await wait_until(pilot, lambda: {first, second, third} <= set(table.rows_shown), what="the group opened")
        assert table.get_cell(str(first), "name").plain == "  seeds-s1"
        order = [row.key.value for row in table.ordered_rows]
        assert order.index(group_key("seeds")) + 1 == order.index(str(first))

        # p on one of its jobs pauses that job alone; the group row counts it.
        table.move_cursor(row=table.get_row_index(str(first)))
        await pilot.pause()
        await pilot.press("p")
        await wait_until(pilot, lambda: "1 paused" in group_state(table, "seeds")
                         and "1 running" in group_state(table, "seeds"),
                         what="one paused and the next one running", report=explain)

        # left closes the group with the cursor on its row; p there pauses every job of it.
        await pilot.press("left")
        await wait_until(pilot, lambda: first not in table.rows_shown, what="the group closed")
        assert table.selected_experiment == "seeds"
        # space marks the group row: its curve is the mean and band over the experiment's three jobs.
        await pilot.press("space")
        await wait_until(pilot, lambda: str(table.get_cell(group_key("seeds"), "mark")) == "●",
                         what="the group row marked")
        assert sorted(job_id for job_id, _ in app.marks.curves[group_key("seeds")][0].runs) == [first, second, third]
        await pilot.press("enter")  # enter opens and closes a group row (on a job row it opens the details)
        await wait_until(pilot, lambda: first in table.rows_shown, what="the group opened by enter")
        await pilot.press("enter")
        await wait_until(pilot, lambda: first not in table.rows_shown, what="the group closed by enter")
        await pilot.press("p")
        await wait_until(pilot, lambda: group_state(table, "seeds") == "3 paused", what="the whole group paused",
                         report=explain)
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmScreen), what="the kill confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: group_state(table, "seeds") == "3 killed", what="the whole group killed",
                         report=explain)
        assert client.find_job(str(lone.id), daemon_home).desired is Desired.RUNNING  # the lone job was left be
