"""A filter that hides the selected job moves the selection to a visible row: every pane and key follows it.

Real daemon, real CartPole workers: one job running, one done. With the running one selected, a filter shows
only the done one; then p, r, k, e and Enter must reach the done one, and the running one must run on.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from textual.widgets import Static
from rlsup_testing import screen_shown

from rlsup import client, paths
from rlsup.run import files as runfiles
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.logtail import LogTail
from rlsup.tui.screens import ConfirmScreen, DetailScreen
from rlsup.tui.widgets import EventsLog, MetricsPlot
from test_foreground_and_features import plain, said_by
from test_live import report, shown_state
from test_screens import make_app, submit_jobs

SIZE = (160, 48)


def stored_state(home, job_id: int) -> State:
    with Store(home) as store:
        return store.job(job_id).state


def plotted_step(app: RlsupApp) -> int:
    view = app.screen.query_one(MetricsPlot).view
    return view.last_step if view is not None else -1


async def filter_to(pilot, text: str) -> None:
    await pilot.press("slash", *text, "enter")
    await pilot.pause()


async def test_every_key_and_pane_follows_the_filter_to_the_visible_job(daemon_home, job_file, wait_until,
                                                                        tmp_path, monkeypatch):
    done_file = job_file("beta-done", total_steps=2_000)
    done = client.submit(done_file, home=daemon_home)
    running = client.submit(job_file("alpha-running", total_steps=10_000_000), home=daemon_home)
    # The editor records the file it was given: `e` must open the visible job's file.
    edited = tmp_path / "edited.txt"
    editor = tmp_path / "editor.py"
    editor.write_text(f"import sys, pathlib\npathlib.Path({str(edited)!r}).write_text(sys.argv[1])\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    app.suspend = contextlib.nullcontext  # the headless driver cannot give the terminal away
    async with app.run_test(size=SIZE) as pilot:
        explain = lambda: report(daemon_home, running.id) + "\n" + report(daemon_home, done.id)  # noqa: E731
        await wait_until(pilot, lambda: shown_state(app, done.id) == "done"
                         and shown_state(app, running.id) == "running", what="one job done, one running",
                         report=explain)
        app.go_to_job(running.id)
        # Past the done job's last step, so that the plot's last step tells the two apart.
        await wait_until(pilot, lambda: app.selected_job_id == running.id and plotted_step(app) > 4_000,
                         what="the running job selected and plotted past 4k steps", report=explain)

        await filter_to(pilot, "beta")
        table = app.screen.query_one(JobsTable)
        assert list(table.rows_shown) == [done.id]
        # The selection, and every pane, moved to the one row shown.
        await wait_until(pilot, lambda: app.selected_job_id == done.id, what="the done job selected",
                         report=lambda: f"selected {app.selected_job_id}")
        await wait_until(pilot, lambda: app.screen.query_one(EventsLog).job_id == done.id
                         and any(event.to_state == "done" for event in app.screen.query_one(EventsLog).shown),
                         what="the done job's events in the pane")
        await wait_until(pilot, lambda: plotted_step(app) == app.model.row(done.id).step,
                         what="the done job's metrics in the plot", report=lambda: str(plotted_step(app)))
        log_end = runfiles.tail_lines(Path(app.model.row(done.id).job.run_dir) / paths.LOG_FILE, 3)
        await wait_until(pilot, lambda: app.screen.query_one(LogTail).shown[-3:] == list(log_end),
                         what="the done job's worker.log in the pane")

        said = said_by(app)
        for key in ("up", "down", "p", "r"):  # ↑ ↓ stay on the one visible row
            await pilot.press(key)
            await pilot.pause()
        assert len([text for text in said if f"job {done.id} is done" in text]) == 2, said
        assert app.selected_job_id == done.id
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmScreen), what="the kill question")
        question = str(app.screen.question)
        assert f"Kill job {done.id} (beta-done)?" in question, question
        await pilot.press("n")
        await pilot.press("e")
        await wait_until(pilot, edited.exists, what="the editor run")
        assert edited.read_text() == str(done_file)

        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_shown(app, DetailScreen), what="the detail screen")
        details = plain(app.screen.query_one("#info", Static).content)
        assert "beta-done" in details and "alpha-running" not in details, details
        await pilot.press("escape")
        await pilot.pause()

    assert stored_state(daemon_home, running.id) is State.RUNNING, explain()
    with Store(daemon_home) as store:
        assert not [event for event in store.events(running.id) if event.kind == "intent"]


async def test_a_filter_that_shows_no_job_leaves_nothing_selected(rlsup_home, wait_until):
    ids = submit_jobs(rlsup_home, ["alpha", "beta"])
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.selected_job_id == ids[0], what="the first job selected")
        await filter_to(pilot, "zzz")
        await wait_until(pilot, lambda: app.selected_job_id is None, what="nothing selected",
                         report=lambda: f"selected {app.selected_job_id}")
        said = said_by(app)
        await pilot.press("p")
        await pilot.pause()
        assert said == ["No job selected."]
    with Store(rlsup_home) as store:
        assert [job.desired for job in store.jobs()] == [Desired.RUNNING, Desired.RUNNING]
