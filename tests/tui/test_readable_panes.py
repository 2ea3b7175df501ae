"""What a reader can tell apart and read whole: cut names keep their ends, a legend never covers a curve, the
detail screen plots only its own job, and the panes keep room to read at 100×30 and 160×48."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from rlsup_testing import screen_shown

from rlsup import paths
from rlsup.views import plots as plotting
from rlsup.checkpoint.manifest import BEST, CheckpointEntry
from rlsup.formatting import middle_cut
from rlsup.jobs.store import Store
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.logtail import LogTail
from rlsup.tui.screens import DetailScreen, HelpScreen
from rlsup.tui.widgets import CheckpointsTable, EventsLog, MetricsPlot
from test_compare import drawn, mark, real_runs, submit_runs  # noqa: F401 (real_runs: a fixture)
from test_layout import BRAILLE, PlotOnly, edge_view, screen_lines
from test_screens import make_app, submit_jobs
from test_snapshots import NOW, add_job, recorded_app, recorded_home, settle  # noqa: F401 (recorded_home: a fixture)

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


# ---------------------------------------------------------------------------------------------
# Each pane usable at 100×30 and 160×48, on the recorded run (test_snapshots)

LONG_LOG_LINE = ("2026-11-22 01:05:38,786 INFO paused at step 43776 with a checkpoint in "
                 "checkpoints/step-000000043776-pause; resume it with rlsup resume 1 (it starts from this step)")


def frame_rows(lines: list[str]) -> int:
    """The rows between a plot's frame top and bottom: what its curves get."""
    top = next(row for row, line in enumerate(lines) if "┌" in line)
    return next(row for row, line in enumerate(lines) if "└" in line) - top - 1


def busy_home(home) -> None:
    """The recorded run beside a sweep's worth of queued jobs, and a worker.log line longer than any pane."""
    with Store(home) as store:
        for number in range(6):
            add_job(store, home, f"cp-sweep-lr0.00{number}-seed3", "CartPole-v1", 50_000)
        run_dir = Path(store.job(1).run_dir)
    with (run_dir / paths.LOG_FILE).open("a") as log:
        log.write(LONG_LOG_LINE + "\n")


@pytest.mark.parametrize("size", [(100, 30), (160, 48)])
async def test_the_main_screen_leaves_events_and_the_log_room_to_read(recorded_home, size):
    busy_home(recorded_home)
    app = recorded_app(recorded_home)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.pause()
        events, log = app.screen.query_one(EventsLog), app.screen.query_one(LogTail)
        assert events.scrollable_content_region.height >= 4 and log.scrollable_content_region.height >= 4, \
            "\n".join(screen_lines(app))
        # The long line wraps: every word of it is on screen, in the pane's last rows.
        shown = " ".join(" ".join(screen_lines(app, log.content_region)).split())
        assert " ".join(LONG_LOG_LINE.split()[-12:]) in shown, "\n".join(screen_lines(app, log.content_region))


@pytest.mark.parametrize("size", [(100, 30), (160, 48)])
async def test_the_detail_screen_plots_have_room_and_its_panes_scroll_into_view(recorded_home, size):
    app = recorded_app(recorded_home)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert screen_shown(app, DetailScreen)
        plots = list(app.screen.query(MetricsPlot))
        rows = [frame_rows(screen_lines(app, plot.content_region)) for plot in plots]
        assert min(rows) >= 8, "\n".join(screen_lines(app))
        titles = [screen_lines(app, plot.content_region)[0] for plot in plots]
        assert [word in title for word, title in zip(("eturn", "Loss", "Steps per second"), titles)] == [True] * 3, \
            titles  # each plot says what it draws
        await pilot.press("end")
        await pilot.pause(0.3)
        events = app.screen.query_one("#detail-events", EventsLog)
        visible = events.region.intersection(app.screen.region)
        assert visible.height >= 6, "\n".join(screen_lines(app))


async def test_at_100_by_30_the_help_scrolls_to_its_last_line(recorded_home):
    app = recorded_app(recorded_home)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        assert screen_shown(app, HelpScreen)
        first = "\n".join(screen_lines(app))
        assert "move between jobs" in first, first
        for _ in range(10):
            await pilot.press("down")
        await pilot.pause(0.3)
        last = "\n".join(screen_lines(app))
        assert "command palette" in last and "RLSUP_HOME" in last, last


def best_entry(path: Path, mean: float) -> CheckpointEntry:
    return CheckpointEntry.from_manifest(path, {"step": 40_000, "reason": BEST, "time": NOW,
                                                "extra": {"evaluation_mean": mean}})


@pytest.mark.parametrize("size", [(100, 30), (160, 48)])
async def test_a_best_checkpoint_reason_is_read_whole(recorded_home, size):
    app = recorded_app(recorded_home)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.screen.query_one(CheckpointsTable)
        entries = app.model.checkpoints + (best_entry(Path("/nowhere/step-40000-best"), -1_234.56),)
        table.show(entries, app.model.verified)
        await pilot.pause()
        text = "\n".join(screen_lines(app, table.content_region))
        assert "best -1234.6" in text, text
