"""An opened group's numbers read whole from the first frame after it opens, with a real daemon training its seeds
(issue 50 item 7): Step, Return and ETA were cut for one refresh."""
from __future__ import annotations

import pytest
from rich.text import Text
from rlsup_testing import cartpole_job
from test_layout import screen_lines
from test_live import shown_state

from rlsup import client
from rlsup.hardware import FakeHardware
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable, group_key

SIZES = [(120, 40), (100, 30)]
NUMBERS = ("progress", "speed", "return", "eta")


def cut_numbers(table: JobsTable, *on_screen: str) -> list[str]:
    """Each number cell whose text is not whole in its row on screen, as 'row key column: text', of the rows in
    view (those scrolled below are not drawn); the rows of on_screen must be in view."""
    lines = screen_lines(table.app, table.region)
    cut = []
    for key, cells in table.cells_shown.items():
        label = cells[1].plain.strip()
        line = next((line for line in lines if line.split()[:1] == [label]), None)
        if line is None:
            cut += [f"{key}: not in view"] if key in on_screen else []
            continue
        for (column, _), cell in zip(table.columns.items(), cells):
            text = cell.plain.strip() if isinstance(cell, Text) else str(cell)
            if column.value in NUMBERS and text not in line:
                cut.append(f"{key} {column.value}: {text!r} in {line!r}")
    return cut


def live(table: JobsTable, key: str, columns: tuple[str, ...]) -> bool:
    """The row shows these columns' figures (a speed, a return): a job that trains and has finished episodes."""
    cells = dict(zip((column.value for column in table.columns), table.cells_shown.get(key, ())))
    return bool(cells) and all(cells[column].plain.strip() not in ("", "–") for column in columns)


def ready(app: RlsupApp, lone: int) -> bool:
    """The lone job done below the group row, which shows a speed and a return, and a seed has an ETA."""
    table = app.screen.query_one(JobsTable)
    return (shown_state(app, lone) == "done" and live(table, group_key("seeds"), ("speed", "return"))
            and any(row.eta_s is not None and row.mean_return is not None for row in app.model.rows))


@pytest.mark.parametrize("size", SIZES)
async def test_an_opened_groups_numbers_are_whole_from_its_first_frame(daemon_home, tmp_path, wait_until, size):
    """issue 50 item 7: opening a group rebuilt the table, whose columns kept their headers' widths until Textual
    measured the new rows on its next idle: a running seed's step, return and ETA were drawn cut meanwhile."""
    # A short lone job first: done, its row sorts below the group's, so the group's jobs open between them.
    lone = client.submit(cartpole_job(tmp_path, name="lone", total_steps=500), home=daemon_home)
    path = cartpole_job(tmp_path, name="seeds", total_steps=60_000)  # an ETA from 3k steps, done in minutes
    jobs = client.submit_experiment(path, seeds=(1, 2), home=daemon_home)
    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(JobsTable)
        group = group_key("seeds")
        await wait_until(pilot, lambda: ready(app, lone.id), what="the lone job done, a seed training with an ETA",
                         timeout=180, report=lambda: str(table.cells_shown))
        table.move_cursor(row=table.get_row_index(group))
        await pilot.pause()
        assert table.ordered_rows[-1].key.value == str(lone.id) and cut_numbers(table) == []
        table.action_open_group()  # what the right key does, read before Textual's next idle
        seeds = [str(job.id) for job in jobs]
        assert any(live(table, key, ("speed", "return", "eta")) for key in seeds), table.cells_shown
        assert cut_numbers(table, group, *seeds) == []
        refreshes = app.model.rows
        await wait_until(pilot, lambda: app.model.rows is not refreshes, what="the first refresh after opening")
        assert cut_numbers(table, group, *seeds) == []
