"""The experiment pane: on a group row, its summary and variant table, "–" before evaluations and the right numbers after."""
from __future__ import annotations

import io
import re

from rich.console import Console
from rlsup_testing import cartpole_job

from rlsup import client
from rlsup.views import groups
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.experiment import READING, ExperimentPane
from rlsup.tui.jobstable import JobsTable, group_key
from rlsup.tui.widgets import CheckpointsTable, EventsLog

SIZE = (160, 48)
SWEEP = '\n[sweep]\n"dqn.lr" = [1e-3, 3e-4]\n'


def plain(renderable) -> str:
    console = Console(width=SIZE[0], file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def pane_text(app: RlsupApp) -> str:
    pane = app.screen.query_one(ExperimentPane)
    return plain(pane.content) if pane.display else ""


def figures(text: str) -> dict[str, str]:
    """The group's figures above the variant table: "Jobs" -> "4: 4 queued" and so on."""
    pairs = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in text.splitlines()[:4]]
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def variant_lines(text: str) -> list[list[str]]:
    """The pane's variant table rows, each as its cells (split on the table's two-space gaps); none before it."""
    lines = text.splitlines()
    start = next((index for index, line in enumerate(lines) if line.split()[:1] == ["variant"]), len(lines))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break  # the table ends at the blank line before the pane's hint
        rows.append([cell.strip() for cell in line.split("  ") if cell.strip()])
    return rows


def expected_lines(jobs) -> list[list[str]]:
    """What `rlsup status EXPERIMENT` computes from the runs' whole metrics files."""
    return [list(cells) for cells in groups.variant_cells(groups.variant_results(jobs))]


def stored_jobs(home, experiment: str):
    with Store(home) as store:
        return store.experiment_jobs(experiment)


async def test_a_group_row_shows_its_variant_table_before_and_after_evaluations(daemon_home, tmp_path, wait_until):
    path = cartpole_job(tmp_path, name="sweep", total_steps=1_500, eval_every=500, checkpoint_every=500)
    path.write_text(path.read_text() + SWEEP)
    # Queued with no daemon yet: no run has an evaluation while the pane is first looked at.
    jobs = client.submit_experiment(path, seeds=(1, 2), home=daemon_home, start_daemon=False)
    assert len(jobs) == 4

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "sweep" in table.groups_shown, what="the group row")
        table.move_cursor(row=table.get_row_index(group_key("sweep")))
        # The table's rows, not the word: "best variant" is in the figures above it, shown while the table
        # still reads (a CI run asserted at that moment).
        await wait_until(pilot, lambda: variant_lines(pane_text(app)), what="the variant table",
                         report=lambda: pane_text(app))
        before = pane_text(app)
        assert figures(before) == {"Jobs": "4: 4 queued", "Steps": "0 of 6,000", "Latest return": "– (mean ± std of the best variant)",
                                   "ETA": "–"}
        # n counts the seeds evaluated, which the means are over (issue 50 item 4: it counted seeds not yet evaluated).
        assert variant_lines(before) == [["dqn.lr=0.001", "0", "–", "–"], ["dqn.lr=0.0003", "0", "–", "–"]]
        assert variant_lines(before) == expected_lines(stored_jobs(daemon_home, "sweep"))
        assert not app.screen.query_one(CheckpointsTable).display  # the pane took the side column

        client.ensure_daemon(daemon_home)
        done = lambda: all(job.state is State.DONE for job in stored_jobs(daemon_home, "sweep"))  # noqa: E731
        await wait_until(pilot, lambda: done() and figures(pane_text(app))["Jobs"] == "4: 4 done", timeout=300,
                         what="every job done and the pane saying so", report=lambda: pane_text(app))
        expected = expected_lines(stored_jobs(daemon_home, "sweep"))
        assert all(cell != "–" for line in expected for cell in line), expected  # every run evaluated
        await wait_until(pilot, lambda: variant_lines(pane_text(app)) == expected,
                         what="the pane's numbers equal rlsup status's", report=lambda: pane_text(app))
        assert figures(pane_text(app))["Steps"] == "6,000 of 6,000"

        # A job row shows that job's own checkpoints and events again.
        await pilot.press("right")
        first = jobs[0].id
        await wait_until(pilot, lambda: first in table.rows_shown, what="the group opened")
        table.move_cursor(row=table.get_row_index(str(first)))
        checkpoints = app.screen.query_one(CheckpointsTable)
        await wait_until(pilot, lambda: checkpoints.display and checkpoints.row_count > 0
                         and app.screen.query_one(EventsLog).job_id == first,
                         what="the job's checkpoints and events")
        assert not app.screen.query_one(ExperimentPane).display and app.selected_job_id == first
        assert app.model.experiment is None

        # Back on the group row (A, B, A): the table comes back, not "reading…" for ever.
        table.move_cursor(row=table.get_row_index(group_key("sweep")))
        await wait_until(pilot, lambda: variant_lines(pane_text(app)) == expected and READING not in pane_text(app),
                         what="the variant table again", report=lambda: pane_text(app))
