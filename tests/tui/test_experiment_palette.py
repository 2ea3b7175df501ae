"""The command palette on experiments: go to one, open it, and pause every job of it from its group row."""
from __future__ import annotations

from rlsup_testing import cartpole_job

from rlsup import client
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import Desired
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.experiment import ExperimentPane
from rlsup.tui.jobstable import JobsTable, group_key

SIZE = (160, 48)


async def run_command(pilot, typed: str) -> None:
    await pilot.press("ctrl+p", *typed)
    await pilot.pause(0.5)  # the palette searches in the background
    await pilot.press("enter")


async def test_the_palette_goes_to_an_experiment_opens_it_and_pauses_all_its_jobs(rlsup_home, tmp_path, wait_until,
                                                                                  monkeypatch):
    monkeypatch.setattr(client, "ensure_daemon", lambda home=None, **options: DaemonStatus(True, 1, home))
    lone = client.submit(cartpole_job(tmp_path, name="alone"), home=rlsup_home, start_daemon=False)
    jobs = client.submit_experiment(cartpole_job(tmp_path, name="lrsweep"), seeds=(1, 2, 3), home=rlsup_home,
                                    start_daemon=False)

    def desired() -> dict[int, Desired]:
        with Store(rlsup_home) as store:
            return {job.id: job.desired for job in store.jobs()}

    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(True, 1, home))
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "lrsweep" in table.groups_shown and lone.id in table.rows_shown,
                         what="the group row and the lone job")
        table.move_cursor(row=table.get_row_index(str(lone.id)))
        await wait_until(pilot, lambda: app.selected_job_id == lone.id, what="the lone job selected")

        await run_command(pilot, "go to experiment lrsweep")
        await wait_until(pilot, lambda: table.selected_experiment == "lrsweep", what="the cursor on the group row")
        await wait_until(pilot, lambda: app.screen.query_one(ExperimentPane).display, what="the experiment pane")

        await run_command(pilot, "open or close experiment")
        await wait_until(pilot, lambda: jobs[0].id in table.rows_shown, what="the group opened")
        assert table.selected_key == group_key("lrsweep")

        # The palette names what it acts on: the experiment's jobs, not the first job alone.
        await run_command(pilot, "pause every job of experiment lrsweep")
        group = {job.id for job in jobs}
        await wait_until(pilot, lambda: all(desired()[job_id] is Desired.PAUSED for job_id in group),
                         what="every job of the experiment paused", report=lambda: str(desired()))
        assert desired()[lone.id] is Desired.RUNNING
