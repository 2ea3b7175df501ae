"""A marked group over time: its legend names the seeds with no data yet, and a filter that hides its row hides its
overlay until the filter is cleared (issue 50 item 8), at the sizes the issue names."""
from __future__ import annotations

from pathlib import Path

import pytest
from rlsup_testing import cartpole_job
from test_compare import drawn, plot_text
from test_group_row_plot import append, episodes

from rlsup import client
from rlsup.hardware import FakeHardware
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable, group_key

SIZES = [(120, 40), (100, 30)]
MEAN_OF_TWO = "seeds (mean of 2, band min–max)"


def queued_seeds(home: Path, directory: Path, seeds: tuple[int, ...]) -> list:
    """An experiment of seeds queued with no daemon: the metrics lines are the test's, appended as a worker does."""
    path = cartpole_job(directory, name="seeds", total_steps=1_500)
    return client.submit_experiment(path, seeds=seeds, home=home, start_daemon=False)


async def mark_group(app: RlsupApp, pilot, wait_until, experiment: str) -> None:
    table = app.screen.query_one(JobsTable)
    await wait_until(pilot, lambda: experiment in table.groups_shown, what="the group row")
    table.move_cursor(row=table.get_row_index(group_key(experiment)))
    await pilot.pause()
    await pilot.press("space")


def labels(app: RlsupApp) -> list[str]:
    return [label for label in drawn(app) if label]


@pytest.mark.parametrize("size", SIZES)
async def test_a_marked_groups_legend_names_the_seeds_with_no_data_yet(rlsup_home, tmp_path, wait_until, size):
    """issue 50 item 8: a group whose last seed had no points drew nothing of the group (the mean needs every run
    on one grid), leaving the selected job's one line with no word of why; now the seeds with data are averaged
    and the legend names the one without, until its first points arrive."""
    first, second, third = queued_seeds(rlsup_home, tmp_path, (1, 2, 3))
    append(Path(first.run_dir), *episodes(10, [10.0, 12.0, 14.0, 16.0]))
    append(Path(second.run_dir), *episodes(10, [20.0, 22.0, 24.0, 26.0]))
    waiting = f"{third.id} seeds-s3: no data yet"

    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None)
    async with app.run_test(size=size) as pilot:
        await mark_group(app, pilot, wait_until, "seeds")
        await wait_until(pilot, lambda: labels(app)[:1] == [f"{MEAN_OF_TWO} · {waiting}"],
                         what="the mean of the two seeds with data, naming the third", report=lambda: str(labels(app)))
        assert "no data yet" in plot_text(app)  # the legend says it on screen, not only in the label

        append(Path(third.run_dir), *episodes(10, [30.0, 32.0, 34.0, 36.0]))
        app.poll_now()
        await wait_until(pilot, lambda: labels(app)[:1] == ["seeds (mean of 3, band min–max)"],
                         what="all three seeds averaged, the note gone", report=lambda: str(labels(app)))
        assert "no data yet" not in plot_text(app)


@pytest.mark.parametrize("size", SIZES)
async def test_a_lone_seed_with_data_is_drawn_as_itself_naming_the_rest(rlsup_home, tmp_path, wait_until, size):
    """issue 50 item 8: with one seed of two plotted, the group is that seed's line, said to be one of two."""
    first, second = queued_seeds(rlsup_home, tmp_path, (1, 2))
    append(Path(first.run_dir), *episodes(10, [10.0, 12.0, 14.0]))

    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None)
    async with app.run_test(size=size) as pilot:
        await mark_group(app, pilot, wait_until, "seeds")
        await wait_until(pilot, lambda: labels(app)[:1] == [f"seeds · {second.id} seeds-s2: no data yet"],
                         what="the one seed with data, naming the other", report=lambda: str(labels(app)))


@pytest.mark.parametrize("size", SIZES)
async def test_a_filter_hiding_a_marked_groups_row_hides_its_overlay_until_cleared(rlsup_home, tmp_path, wait_until,
                                                                                   size):
    """issue 50 item 8: a marked group stayed overlaid while a filter hid its row; now it is hidden while filtered
    out and overlaid again, still marked, when the filter is cleared."""
    seeds = queued_seeds(rlsup_home, tmp_path, (1, 2))
    for job, returns in zip(seeds, ([10.0, 12.0, 14.0], [20.0, 22.0, 24.0])):
        append(Path(job.run_dir), *episodes(10, returns))
    lone = client.submit(cartpole_job(tmp_path, name="other", total_steps=1_500), home=rlsup_home,
                         start_daemon=False)
    append(Path(lone.run_dir), *episodes(10, [5.0, 6.0, 7.0]))
    group_label = "seeds (mean of 2, band min–max)"

    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None)
    async with app.run_test(size=size) as pilot:
        await mark_group(app, pilot, wait_until, "seeds")
        await wait_until(pilot, lambda: group_label in labels(app), what="the group overlaid",
                         report=lambda: str(labels(app)))

        await pilot.press("slash", *"other", "enter")
        await wait_until(pilot, lambda: app.selected_job_id == lone.id and group_label not in labels(app),
                         what="the filtered-out group's overlay gone", report=lambda: str(labels(app)))
        await wait_until(pilot, lambda: "smoothed" in drawn(app), what="the one job shown, plotted as ever",
                         report=lambda: str(labels(app)))
        assert group_label not in plot_text(app)

        app.poll_now()  # new rows under the same filter keep it hidden
        await pilot.pause()
        assert group_label not in labels(app)

        await pilot.press("slash", "escape")
        await wait_until(pilot, lambda: group_label in labels(app), what="the group overlaid again, still marked",
                         report=lambda: str(labels(app)))
        assert str(app.screen.query_one(JobsTable).get_cell(group_key("seeds"), "mark")) == "●"
