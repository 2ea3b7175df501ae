"""Panes at the width they have, at 120×40 and 100×30 (issue 50 items 7 and 10): the events and the log wrap to
their pane after the experiment pane gave the side column back, an opened group keeps its numbers whole, and
the state column and the checkpoints' Verified read whole at 120 columns."""
from __future__ import annotations

from pathlib import Path

import pytest

from rlsup import paths
from rlsup.jobs.record import EventKind
from rlsup.jobs.store import Store
from rlsup.tui.jobstable import JobsTable, group_key
from rlsup.tui.logtail import LogTail
from rlsup.tui.widgets import CheckpointsTable, EventsLog
from test_layout import screen_lines
from test_screens import make_app
from test_snapshots import recorded_app, recorded_home, settle  # noqa: F401 (recorded_home: a fixture)

SIZES = [(120, 40), (100, 30)]
LONG = ("the daemon applied an edit of total_steps from 10,000 to 20,000 and the worker took it at its next "
        "step boundary without a restart")


def experiment_home(home: Path) -> list[int]:
    """An experiment of two seeds whose first job has a long event and a long log line, and a lone job."""
    ids = []
    with Store(home) as store:
        for name, experiment in (("seeds-s1", "seeds"), ("seeds-s2", "seeds"), ("lone", "")):
            run_dir = home / "runs" / name
            run_dir.mkdir(parents=True)
            (run_dir / paths.LOG_FILE).write_text(f"{name}: {LONG}\n")
            job = store.submit(name=name, spec_path=home / f"{name}.toml", run_dir=run_dir, algo="dqn",
                               env="CartPole-v1", total_steps=10_000, experiment=experiment)
            store.add_event(job.id, EventKind.EDIT, LONG)
            ids.append(job.id)
    return ids


def wrapped_short(app, widget) -> tuple[str, str] | None:
    """The pane's last two lines on screen when the last one's first word would have fitted on the one before
    (a wrap narrower than the pane); None when they are wrapped at its width."""
    room = widget.scrollable_content_region.width
    lines = [line.rstrip() for line in screen_lines(app, widget.scrollable_content_region) if line.strip()]
    before, last = lines[-2:]
    return (before, last) if len(before) + 1 + len(last.split()[0]) <= room else None


@pytest.mark.parametrize("size", SIZES)
async def test_events_and_log_wrap_to_their_pane_after_a_group_row(rlsup_home, wait_until, size):
    """issue 50 item 7: after the cursor left a group row, Events and worker.log wrapped at about 20 columns."""
    first, second, lone = experiment_home(rlsup_home)
    app = make_app(rlsup_home)
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(JobsTable)
        events, log = app.screen.query_one(EventsLog), app.screen.query_one(LogTail)
        await wait_until(pilot, lambda: group_key("seeds") in table.cells_shown, what="the group row")
        table.move_cursor(row=table.get_row_index(str(lone)))  # the panes laid out at their width first
        await wait_until(pilot, lambda: events.job_id == lone and log.shown, what="the lone job's panes")
        await pilot.pause()
        table.move_cursor(row=table.get_row_index(group_key("seeds")))
        await wait_until(pilot, lambda: app.model.experiment == "seeds" and not events.size.width,
                         what="the experiment pane in place of the job's")
        # What a live poller brings while the group row is under the cursor lands in the hidden panes.
        with Store(rlsup_home) as store:
            store.add_event(first, EventKind.EDIT, f"while hidden: {LONG}")
        with (rlsup_home / "runs" / "seeds-s1" / paths.LOG_FILE).open("a") as file:
            file.write(f"while hidden: {LONG}\n")
        app.poll_now()
        await wait_until(pilot, lambda: len(events.shown) == 3 and len(log.shown) == 2, what="the new lines read")
        await pilot.press("right")
        await wait_until(pilot, lambda: first in table.rows_shown, what="the group opened")
        table.move_cursor(row=table.get_row_index(str(first)))  # the job the group row had selected
        await wait_until(pilot, lambda: app.model.experiment is None and events.job_id == first and log.shown,
                         what="the job's panes")
        await pilot.pause()
        for widget in (events, log):
            assert wrapped_short(app, widget) is None, (widget.id, screen_lines(app, widget.content_region))


def waiting_home(home: Path) -> list[int]:
    """Jobs with long names, queued for the reasons the scheduler gives, beside an experiment's seeds."""
    reasons = ("waiting for a CPU slot", "waiting for 1 free GPU(s)", "needs 1 GPU; this machine has 0")
    ids = []
    with Store(home) as store:
        for index, reason in enumerate(reasons):
            name = f"cartpole-dqn-sweep-lr0.001-s{index}"
            job = store.submit(name=name, spec_path=home / f"{name}.toml", run_dir=home / "runs" / name,
                               algo="dqn", env="CartPole-v1", total_steps=50_000)
            store.update(job.id, reason=reason)
            ids.append(job.id)
    return ids


@pytest.mark.parametrize("size", SIZES)
async def test_the_state_column_says_why_a_job_waits_whole(rlsup_home, wait_until, size):
    """issue 50 item 10: at 120 columns the state column read `queued: waitin…`."""
    ids = waiting_home(rlsup_home)
    app = make_app(rlsup_home)
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 3, what="three rows")
        await pilot.pause()
        lines = screen_lines(app, table.region)
        shown = {job_id: next(line for line in lines if line.split()[:1] == [str(job_id)]) for job_id in ids}
        for job_id, expected in zip(ids, ("queued for a CPU slot", "queued for 1 free GPU(s)", "queued: needs 1 GPU")):
            assert expected in shown[job_id], (expected, lines)
        names = [line.split()[1] for line in shown.values()]
        assert len(set(names)) == 3, names  # the names still tell the jobs apart


@pytest.mark.parametrize("size", SIZES)
async def test_the_checkpoints_pane_shows_verified(recorded_home, size):
    """issue 50 item 10: at 120 columns the Checkpoints pane cut its Verified column."""
    app = recorded_app(recorded_home)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        lines = screen_lines(app, app.screen.query_one(CheckpointsTable).region)
        assert "Verified" in lines[1] and "✓ ok" in lines[2] and "Size" in lines[1], lines
