"""Curves side by side: marked jobs overlaid in the plot with a legend, a group as mean and band, the smoothing key.

The runs are real: two short CartPole trainings by `rlsup run`, their directories copied into each test's home.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rlsup_testing import trained_runs

from rlsup import paths
from rlsup.views import plots as plotting
from rlsup.jobs.store import Store
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.overlay import Curve, group_curve
from rlsup.tui.widgets import MetricsPlot
from test_layout import PlotOnly, edge_view, outside_frame, screen_lines
from test_screens import make_app

SIZE = (160, 48)


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory) -> list[Path]:
    return trained_runs(tmp_path_factory, seeds=(1, 2))


def submit_runs(home: Path, runs: list[Path], names: list[str]) -> list[tuple[int, Path]]:
    """Copies of the runs in home, each a job of the store (queued: no daemon runs here)."""
    jobs = []
    with Store(home) as store:
        for run, name in zip(runs, names):
            run_dir = home / "runs" / name
            shutil.copytree(run, run_dir)
            jobs.append((store.submit(name=name, spec_path=run / paths.JOB_FILE, run_dir=run_dir, algo="dqn",
                                      env="CartPole-v1", total_steps=1_500).id, run_dir))
    return jobs


def drawn(app) -> dict[str | None, tuple[tuple, tuple]]:
    return {label: (steps, values) for label, steps, values in app.screen.query_one(MetricsPlot).drawn}


def plot_text(app) -> str:
    return "\n".join(screen_lines(app, app.screen.query_one(MetricsPlot).content_region))


async def mark(app, pilot, job_id: int) -> None:
    app.go_to_job(job_id)
    await pilot.pause()
    await pilot.press("space")
    await pilot.pause()


async def mark_two(app, pilot, wait_until, first: int, second: int) -> None:
    """Mark the two jobs of a two-job table and wait for the overlay of both."""
    await wait_until(pilot, lambda: app.screen.query_one(JobsTable).row_count == 2, what="two rows")
    await mark(app, pilot, first)
    await mark(app, pilot, second)
    await wait_until(pilot, lambda: len(drawn(app)) == 2, what="both jobs overlaid")


def append_episode(run_dir: Path, step: int, value: float) -> None:
    with (run_dir / paths.METRICS_FILE).open("a") as file:
        file.write(json.dumps({"t": 0.0, "kind": "episode", "step": step, "return": value, "length": 9}) + "\n")


async def test_marked_jobs_are_overlaid_extended_and_removed(rlsup_home, real_runs, wait_until):
    (first, _), (second, second_dir), (third, _) = submit_runs(rlsup_home, real_runs + real_runs[:1],
                                                                      ["seed-a", "seed-b", "other"])
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one(JobsTable).row_count == 3, what="three rows")
        app.go_to_job(third)
        await pilot.pause()
        await wait_until(pilot, lambda: "smoothed" in drawn(app), what="the selected job's plot as before")
        assert set(drawn(app)) == {"episodes", "smoothed", "evaluation"}  # nothing marked: one job, as ever

        await mark(app, pilot, first)
        await mark(app, pilot, second)
        table = app.screen.query_one(JobsTable)
        assert [str(table.get_cell(str(job), "mark")) for job in (first, second, third)] == ["●", "●", ""]
        labels = [f"{first} seed-a", f"{second} seed-b"]
        await wait_until(pilot, lambda: list(drawn(app)) == labels, what="both marked jobs overlaid",
                         report=lambda: str(list(drawn(app))))
        text = plot_text(app)
        assert all(label in text for label in labels), text  # the legend names each job

        before = drawn(app)
        last_step = before[labels[1]][0][-1]
        append_episode(second_dir, int(last_step) + 100, 321.0)
        app.poll_now()
        await wait_until(pilot, lambda: drawn(app)[labels[1]][0][-1] > last_step, what="seed-b extended")
        assert drawn(app)[labels[0]] == before[labels[0]]  # the other job's line did not move

        await pilot.press("space")  # the cursor is on seed-b: unmarked
        await wait_until(pilot, lambda: list(drawn(app)) == labels, what="seed-b still drawn as the selected job")
        app.go_to_job(third)
        await wait_until(pilot, lambda: list(drawn(app)) == [labels[0], f"{third} other"],
                         what="seed-b gone, the newly selected job beside seed-a", report=lambda: str(list(drawn(app))))
        app.go_to_job(first)
        await pilot.press("space")
        await wait_until(pilot, lambda: set(drawn(app)) == {"episodes", "smoothed", "evaluation"},
                         what="nothing marked: the single-job plot again")


async def test_the_smoothing_key_redraws_the_returns_and_names_the_weight(rlsup_home, real_runs, wait_until):
    (first, _), (second, _) = submit_runs(rlsup_home, real_runs, ["seed-a", "seed-b"])
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await mark_two(app, pilot, wait_until, first, second)
        label = f"{first} seed-a"
        assert "smoothing 0.9" in plot_text(app)
        shown = {0.9: drawn(app)[label][1]}
        for weight in (0.99, 0.0, 0.6):
            await pilot.press("S")
            await wait_until(pilot, lambda: f"smoothing {'off' if weight == 0 else weight}" in plot_text(app),
                             what=f"the title at smoothing {weight}", report=lambda: plot_text(app))
            shown[weight] = drawn(app)[label][1]
        assert len(set(shown.values())) == 4, "each weight draws other values"
        # Off draws the raw returns, averaged only by the downsampling buckets: here one episode each.
        raw = plotting.read_series(app.model.row(first).job.run_dir, "return", "a")
        assert shown[0.0] == raw.values
        assert shown[0.6] == pytest.approx(plotting.smooth(raw, 0.6).values)


async def test_a_marked_group_is_drawn_as_its_mean_within_its_band(rlsup_home, real_runs, wait_until):
    (first, _), (second, _) = submit_runs(rlsup_home, real_runs, ["seed-a", "seed-b"])
    app = make_app(rlsup_home)
    async with app.run_test(size=SIZE) as pilot:
        await mark_two(app, pilot, wait_until, first, second)
        alone = [plotting.Series(label, *line) for label, line in drawn(app).items()]
        app.toggle_mark(Curve(str(first), "", ()))  # unmarked by its key, as space does
        app.toggle_mark(Curve(str(second), "", ()))
        app.toggle_mark(group_curve("group:seeds", "seeds", [first, second], app.model.rows))
        group = plotting.group_label("seeds", 2)
        await wait_until(pilot, lambda: group in drawn(app), what="the group's mean",
                         report=lambda: str(list(drawn(app))))
        expected = plotting.aggregate(alone, group)
        lines = app.screen.query_one(MetricsPlot).drawn
        # The mean, then the band's edges (dotted, without a legend entry), then the selected job beside it.
        assert [label for label, _, _ in lines] == [group, None, None, f"{second} seed-b"]
        assert lines[0][1:] == (expected.steps, expected.mean)
        assert lines[1][2] == expected.low and lines[2][2] == expected.high
        assert all(low <= mean <= high for low, mean, high in zip(expected.low, expected.mean, expected.high))
        assert expected.low != expected.high  # two seeds differ: a band, not a line
        assert "seeds (mean of 2" in plot_text(app)


@pytest.mark.parametrize("size", [(40, 12), (60, 16), (100, 30)])
async def test_overlaid_lines_and_bands_stay_inside_the_frame(size):
    steps = tuple(float(step) for step in range(0, 50_001, 500))
    first = plotting.Series("1 a", steps, tuple(9.0 + (index % 7) * 80 for index in range(len(steps))))
    second = plotting.Series("2 b", steps[:50], tuple(500.0 - index for index in range(50)))
    group = plotting.aggregate([first, second], "seeds")
    view = replace(edge_view(), compared=(("return", (first, group)),))
    app = PlotOnly()
    async with app.run_test(size=size) as pilot:
        plot = app.query_one(MetricsPlot)
        plot.show(view)
        await pilot.pause()
        lines = screen_lines(app, plot.content_region)
        assert [label for label, _, _ in plot.drawn] == ["1 a", "seeds", None, None]
        assert outside_frame(lines) == [], "\n".join(lines)
