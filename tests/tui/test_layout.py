"""The layout at the sizes people use: what a reader sees at 100×30, a jobs table as tall as its rows,
the detail screen's times, and plot points inside their frame."""
from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from rlsup_testing import screen_shown

from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.tui import messages
from rlsup.tui.metrics import MetricsView
from rlsup.tui.jobstable import JOB_COLUMNS, JobsTable
from rlsup.tui.screens import DetailScreen
from rlsup.tui.widgets import CheckpointsTable, MetricsPlot
from test_screens import make_app, submit_jobs
from test_snapshots import NOW, recorded_app, recorded_home, settle  # noqa: F401 (recorded_home: a fixture)

BRAILLE = range(0x2801, 0x2900)


def screen_lines(app: App, region: Region | None = None) -> list[str]:
    """The text on screen, as a terminal shows it, cut to region. Textual has no public text export, so
    this reads the compositor's strips: what a widget holds is not what fits on screen."""
    strips = app.screen._compositor.render_strips()
    region = region or app.screen.region
    return ["".join(segment.text for segment in strip)[region.x:region.right]
            for strip in strips[region.y:region.bottom]]


async def test_at_100_by_30_every_header_and_quit_are_on_screen(recorded_home):
    app = recorded_app(recorded_home)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        jobs = app.screen.query_one(JobsTable)
        jobs_header = screen_lines(app, jobs.region)[0]
        assert [label for _, label in JOB_COLUMNS if label not in jobs_header] == [], jobs_header
        checkpoints = app.screen.query_one(CheckpointsTable)
        checkpoints_header = screen_lines(app, checkpoints.content_region)[0]
        labels = [label for _, label in CheckpointsTable.COLUMNS if label]
        assert [label for label in labels if label not in checkpoints_header] == [], checkpoints_header
        # The footer is painted after the tables: under load (CI, 2026-12-01) it was still blank here once.
        for _ in range(200):
            if "q Quit" in screen_lines(app)[-1]:
                break
            await pilot.pause(0.05)
        assert "q Quit" in screen_lines(app)[-1]


def expected_height(jobs: int, screen_height: int) -> int:
    """A header and a line per job, at least 4 lines and at most two fifths of the screen (app.tcss) less
    its docked title and footer lines."""
    return max(4, min(jobs + 1, int((screen_height - 2) * 0.4)))


async def test_the_jobs_table_grows_with_its_rows_within_limits(rlsup_home, wait_until):
    size = (160, 48)
    app = make_app(rlsup_home)
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(JobsTable)
        plot = app.screen.query_one(MetricsPlot)
        heights = []
        for count in (1, 2, 5, 12, 30):
            submit_jobs(rlsup_home, [f"job-{count}-{index}" for index in range(count - table.row_count)])
            app.poll_now()
            await wait_until(pilot, lambda: table.row_count == count, what=f"{count} rows")
            await pilot.pause()
            assert table.outer_size.height == expected_height(count, size[1]), (count, table.outer_size, table.size)
            heights.append(plot.size.height)
        # What the table does not take, the plot gets: it shrinks only while the table grows.
        assert heights == sorted(heights, reverse=True) and heights[0] > heights[-1]


def info_text(app: App) -> str:
    return "\n".join(screen_lines(app, app.screen.query_one("#info").region))


@pytest.mark.parametrize("job_id, shown, hidden", [
    (1, "Running since", ("Finished", "Paused at")),  # running, after an earlier pause: `finished` is set
    (5, "Paused at", ("Finished", "Running since")),
    (6, "Finished", ("Paused at", "Running since")),
])
async def test_the_detail_screen_shows_the_times_true_of_the_state(recorded_home, job_id, shown, hidden):
    with Store(recorded_home) as store:
        store.update(1, finished=NOW - 300)
        assert [store.job(number).state for number in (1, 5, 6)] == [State.RUNNING, State.PAUSED, State.DONE]
    app = recorded_app(recorded_home)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.go_to_job(job_id)
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, DetailScreen)
        text = info_text(app)
        assert shown in text and not [label for label in hidden if label in text], text


class PlotOnly(App):
    def compose(self) -> ComposeResult:
        yield MetricsPlot("return")


def edge_view() -> MetricsView:
    """Points on every edge of the data: the first and last step, the lowest and highest return."""
    steps = tuple(range(0, 50_001, 500))
    returns = tuple(9.0 + (index % 7) * 80 for index in range(len(steps)))
    return MetricsView(episode_return=(steps, returns), smoothed_return=(steps, tuple(200.0 for _ in steps)),
                       evaluation=((0, 25_000, 50_000), (500.0, 9.0, 500.0)), loss=((), ()), loss_name="loss",
                       steps_per_second=((), ()), records=len(steps), last_step=50_000)


def outside_frame(lines: list[str]) -> list[tuple[int, int, str]]:
    """Every point (braille dot or ◆) on or beyond the axis frame drawn by plotext."""
    top = next(row for row, line in enumerate(lines) if "┌" in line)
    bottom = next(row for row, line in enumerate(lines) if "└" in line)
    left, right = lines[top].index("┌"), lines[top].index("┐")
    return [(row, column, character) for row, line in enumerate(lines) for column, character in enumerate(line)
            if (ord(character) in BRAILLE or character == "◆")
            and not (top < row < bottom and left < column < right)]


@pytest.mark.parametrize("size", [(40, 12), (60, 16), (100, 30)])
async def test_plot_points_stay_inside_the_frame(size):
    app = PlotOnly()
    async with app.run_test(size=size) as pilot:
        plot = app.query_one(MetricsPlot)
        plot.show(edge_view())
        await pilot.pause()
        lines = screen_lines(app, plot.content_region)
        assert sum(line.count("◆") for line in lines) >= 3, "\n".join(lines)  # legend and points drawn
        assert outside_frame(lines) == [], "\n".join(lines)


async def test_rows_that_reach_a_screen_before_it_has_mounted_are_shown_once_it_has(rlsup_home, wait_until):
    """Under load a poll's rows reached a screen on the stack whose widgets were not mounted yet, and the app
    died of NoMatches 'JobsTable'. Here the rows arrive in that gap on purpose: the handler runs between the
    push and the screen's mount (nothing is awaited in between)."""
    ids = submit_jobs(rlsup_home, ["early-bird"])
    app = make_app(rlsup_home)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: app.selected_job_id == ids[0], what="the job selected")
        app.push_screen(DetailScreen())
        app.on_jobs_refreshed(messages.JobsRefreshed(app.model.rows))
        await wait_until(pilot, lambda: screen_shown(app, DetailScreen) and app.screen.mounted,
                         what="the detail screen mounted")
        await pilot.pause()
        assert "early-bird" in info_text(app)
