"""A job's name and reason are shown in the TUI as text, never as escape sequences the terminal acts on."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text
from textual.widgets import Static

from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.logtail import LogTail
from rlsup.tui.screens import ConfirmScreen, job_details

HOSTILE = "$(touch MARKER)\x1b[31mred\u202eevil\nline"


def control_characters(text: str) -> list[str]:
    return [character for character in text if not character.isprintable() and character != "\n"]


async def test_rows_and_details_show_a_hostile_name_and_reason_as_text(rlsup_home, wait_until):
    with Store(rlsup_home) as store:
        job = store.submit(name=HOSTILE, spec_path=rlsup_home / "a.toml", run_dir=rlsup_home / "runs" / "a\x1b[2J",
                           algo="dqn", env="CartPole-v1", total_steps=10_000)
        store.update(job.id, reason=f"waiting for \x1b]0;title\x07{HOSTILE}")
    app = RlsupApp(rlsup_home, hardware=FakeHardware(), daemon_status=lambda home: DaemonStatus(True, 1, home),
                   poll_interval_s=None)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 1, what="the job's row")
        cells = [cell.plain if isinstance(cell, Text) else str(cell) for cell in table.get_row_at(0)]
        assert "$(touch MARKER)\\x1b[31mred\\u202eevil\\nline" in cells, cells
        assert not control_characters("".join(cells)), cells
        row = next(iter(table.rows_shown.values()))
        console = Console(width=160, record=True, file=open("/dev/null", "w"))
        console.print(job_details(row, rlsup_home))
        shown = console.export_text()
        assert "\\x1b]0;title\\x07" in shown and "a\\x1b[2J" in shown, shown
        assert not control_characters(shown), shown
        pane = app.screen.query_one(LogTail)
        pane.show(("step 1", "\x1b[2J\x1b[Hcleared\rprogress \u202eright-to-left"))
        await wait_until(pilot, lambda: len(pane.shown) == 2, what="the log lines")
        assert pane.shown[1] == "\\x1b[2J\\x1b[Hcleared\\rprogress \\u202eright-to-left"
        drawn = "".join(strip.text for strip in pane.lines)  # what the pane draws, wrapped to its width
        assert "right-to-left" in drawn and not control_characters(drawn), drawn


async def test_the_kill_question_shows_a_name_of_markup_as_written(rlsup_home, wait_until):
    with Store(rlsup_home) as store:  # a store older than name sanitising
        store.submit(name="[bold]x[/bold]\x1b[2J", spec_path=rlsup_home / "a.toml", run_dir=rlsup_home / "runs" / "a",
                     algo="dqn", env="CartPole-v1", total_steps=10_000)
    app = RlsupApp(rlsup_home, hardware=FakeHardware(), daemon_status=lambda home: DaemonStatus(True, 1, home),
                   poll_interval_s=None)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: app.selected_job_id is not None, what="the job selected")
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        question = str(app.screen.query_one("#question", Static).render())
        assert "Kill job 1 ([bold]x[/bold]\\x1b[2J)?" in question, question
        await pilot.press("n")
