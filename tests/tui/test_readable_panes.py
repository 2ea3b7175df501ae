"""What a reader can tell apart and read whole: cut names keep their ends, a legend never covers a curve, the
detail screen plots only its own job, and the panes keep room to read at 100×30 and 160×48."""
from __future__ import annotations

from dataclasses import replace

import pytest
from rlsup_testing import screen_shown

from rlsup import plotting
from rlsup.formatting import middle_cut
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.screens import DetailScreen
from rlsup.tui.widgets import MetricsPlot
from test_compare import drawn, mark, real_runs, submit_runs  # noqa: F401 (real_runs: a fixture)
from test_layout import BRAILLE, PlotOnly, edge_view, screen_lines
from test_screens import make_app, submit_jobs

OWN_LABELS = {"return": {"episodes", "smoothed", "evaluation"}, "speed": {"steps/s"}}


def test_a_middle_cut_keeps_both_ends():
    assert middle_cut("cp-sweep-lr0.001-seed3", 14) == "cp-s…001-seed3"
    assert middle_cut("cp-sweep-lr0.0003-seed3", 14) == "cp-s…003-seed3"
    assert middle_cut("cp-sweep-lr0.001-seed3", 40) == "cp-sweep-lr0.001-seed3"
    assert len(middle_cut("cp-sweep-lr0.001-seed3", 9)) == 9


async def test_at_100_by_30_two_sweep_variants_keep_what_tells_them_apart(rlsup_home, wait_until):
    names = ["cp-sweep-lr0.001-seed3", "cp-sweep-lr0.0003-seed3", "cartpole-long-baseline-run-number-one",
             "cartpole-long-baseline-run-number-two"]
    ids = submit_jobs(rlsup_home, names)
    app = make_app(rlsup_home)
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: table.row_count == 4, what="four rows")
        await pilot.pause()
        lines = screen_lines(app, table.region)
        shown = [next(line for line in lines if line.split()[:1] == [str(job_id)]).split()[1] for job_id in ids]
        assert len(set(shown)) == 4, shown  # each name reads differently
        assert [name for name in shown if name.endswith("…")] == [], shown  # the end is kept


async def test_the_detail_screen_plots_its_own_job_not_the_marked_ones(rlsup_home, real_runs, wait_until):
    (first, _), (second, _), (third, _) = submit_runs(rlsup_home, real_runs + real_runs[:1],
                                                      ["seed-a", "seed-b", "other"])
    app = make_app(rlsup_home)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one(JobsTable).row_count == 3, what="three rows")
        await mark(app, pilot, first)
        await mark(app, pilot, second)
        app.go_to_job(third)
        await wait_until(pilot, lambda: f"{third} other" in drawn(app), what="the selected job beside the marks")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_shown(app, DetailScreen), what="the detail screen")

        def labels() -> dict[str, set]:
            return {plot.kind: {label for label, _, _ in plot.drawn} for plot in app.screen.query(MetricsPlot)}
        await wait_until(pilot, lambda: labels()["return"] == OWN_LABELS["return"]
                         and labels()["speed"] == OWN_LABELS["speed"], what="the job's own lines only",
                         report=lambda: str(labels()))
        await pilot.press("escape")
        await wait_until(pilot, lambda: f"{first} seed-a" in drawn(app), what="the marks still overlaid on the main screen")


@pytest.mark.parametrize("size", [(40, 16), (60, 20), (100, 30), (160, 48)])
async def test_the_legend_never_covers_a_curve(size):
    steps = tuple(float(step) for step in range(0, 50_001, 500))
    high = plotting.Series("1 starts-high", steps, tuple(500.0 - index for index in range(len(steps))))
    low = plotting.Series("2 rises", steps, tuple(float(index * 4) for index in range(len(steps))))
    app = PlotOnly()
    async with app.run_test(size=size) as pilot:
        plot = app.query_one(MetricsPlot)
        plot.show(replace(edge_view(), compared=(("return", (high, low)),)))
        await pilot.pause()
        lines = screen_lines(app, plot.content_region)
        legend = [line for line in lines if "starts-high" in line or "rises" in line]
        assert len(legend) == 2, "\n".join(lines)  # each line is named
        # Only the legend's own marker (two braille cells) in its rows: no curve drawn under or over it.
        assert [sum(ord(character) in BRAILLE for character in line) for line in legend] == [2, 2], "\n".join(lines)


def axis_top(lines: list[str]) -> float:
    """The highest value labelled on the plot's y axis, as a reader sees it."""
    return max(float(line.split("┤")[0].replace(",", "")) for line in lines if "┤" in line)


async def test_the_speed_axis_is_set_by_training_not_by_the_warm_up_burst():
    # Two windows of random-action warm-up at 10k steps/s, then one that mixes it with training, then training.
    steps = tuple(float(step) for step in range(0, 50_001, 500))
    steady = tuple(300.0 + (index % 5) * 8 for index in range(len(steps) - 3))
    app = PlotOnly()
    async with app.run_test(size=(60, 20)) as pilot:
        plot = app.query_one(MetricsPlot)
        plot.view = replace(edge_view(), steps_per_second=(steps, (10_154.0, 10_506.0, 1_277.0) + steady))
        plot.show_kind("speed")
        await pilot.pause()
        lines = screen_lines(app, plot.content_region)
        assert max(steady) <= axis_top(lines) < 1.5 * max(steady), "\n".join(lines)
