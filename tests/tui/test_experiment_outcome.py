"""The experiment pane at 100x30 and 120x40 shows every rung whole as an ASHA experiment is decided, and says when
it is finished and who won (issue 50 items 3 and 4)."""
from __future__ import annotations

import pytest
from experiment_story import ASHA, experiment, finish, reach

from rlsup.decisions.ranking import figure
from rlsup.jobs.store import Store
from rlsup.tui.experiment import ExperimentPane
from rlsup.tui.jobstable import JobsTable, group_key
from rlsup.views.decisions import SchedulerView, read_scheduler_view
from test_layout import screen_lines
from test_screens import make_app

NAME = "lunar-lander-asha"  # its members' names (lunar-lander-asha-s1, ...) leave a 120-column pane no room


def stored_view(home) -> SchedulerView:
    with Store(home) as store:
        return read_scheduler_view(store, NAME, store.experiment_jobs(NAME))


def pane_lines(app, pane: ExperimentPane) -> list[str]:
    """The pane's lines as they are on screen, inside its border."""
    return [line.rstrip() for line in screen_lines(app, pane.content_region)]


async def whole_pane(app, pilot, pane: ExperimentPane) -> tuple[list[str], str]:
    """Every line of the pane, read on screen from its top and, when it says more lie below, from its end; and the
    title it showed at the top. A line that fell off with no word of it in the title is never read here."""
    pane.scroll_home(animate=False)
    await pilot.pause(0.2)
    title, lines = str(pane.border_title or ""), pane_lines(app, pane)
    if "↓" in title:
        pane.scroll_end(animate=False)
        await pilot.pause(0.2)
        assert "↑" in pane.border_title and "↓" not in pane.border_title, pane.border_title
        lines += pane_lines(app, pane)
    return lines, title


def assert_rungs_whole(view: SchedulerView, lines: list[str]) -> None:
    """Each member of each comparison on a line of its own with its figure and verdict uncut, its name whole or cut
    with an ellipsis."""
    text = "\n".join(lines)
    for comparison in view.comparisons:
        assert comparison.title in text, (comparison.title, text)
        for placed in comparison.placed:
            cells = f"{figure(placed.value)}  {placed.verdict}"
            found = [line for line in lines if line.strip().startswith(f"{placed.member} ") and cells in line]
            assert found, (placed, text)
            name = found[0].strip()[len(str(placed.member)):].strip().split("  ")[0]
            assert name == placed.name or (name.endswith("…") and placed.name.startswith(name[:-1])), (name, text)


@pytest.mark.parametrize("size", [(100, 30), (120, 40)])
async def test_the_pane_shows_every_rung_whole_and_says_when_asha_is_finished(rlsup_home, tmp_path, wait_until,
                                                                             size) -> None:
    """issue 50 item 3 (every rung whole at both sizes, or scrolled to with the title saying so) and item 4 (the
    outcome: deciding, decided with the winner training, then finished with the best member named)."""
    jobs = experiment(rlsup_home, tmp_path, NAME, ASHA, 1_800)
    ids = [job.id for job in jobs]
    app = make_app(rlsup_home, poll_interval_s=0.2)
    async with app.run_test(size=size) as pilot:
        table = app.screen.query_one(JobsTable)
        pane = app.screen.query_one(ExperimentPane)
        await wait_until(pilot, lambda: NAME in table.groups_shown, what="the group row")
        table.move_cursor(row=table.get_row_index(group_key(NAME)))

        async def shows(*words: str) -> list[str]:
            async def condition_text() -> str:
                return "\n".join((await whole_pane(app, pilot, pane))[0])
            text = ""
            for _ in range(100):
                text = await condition_text()
                if all(word in " ".join(text.split()) for word in words):  # a sentence wraps in the pane
                    return text.splitlines()
                await pilot.pause(0.1)
            raise AssertionError(f"the pane never showed {words}:\n{text}")

        await shows("deciding: 4 members have a rung still ahead")
        with Store(rlsup_home) as store:
            for job_id, value in zip(ids, (348.0, 120.5, 9.25, 200.0)):
                reach(store, job_id, 600, value, "rung 1 of ASHA")
        lines = await shows("rung 1 at 600: 4 reported", "deciding: 2 members have a rung still ahead")
        assert_rungs_whole(stored_view(rlsup_home), lines)

        with Store(rlsup_home) as store:
            reach(store, ids[0], 1_200, 412.0, "rung 2 of ASHA")
            reach(store, ids[3], 1_200, 150.0, "rung 2 of ASHA")
        lines = await shows("rung 2 at 1,200: 2 reported", "1 member still to train to its budget")
        assert_rungs_whole(stored_view(rlsup_home), lines)
        assert "finished" not in "\n".join(lines)

        with Store(rlsup_home) as store:
            finish(store, ids[0])
        lines = await shows("finished: ASHA decided every rung;")
        text = " ".join(" ".join(lines).split())  # the outcome wraps in the pane: read it as one line
        assert f"best job {ids[0]} {NAME}-s1, eval_return 412 at rung 2" in text, text
        assert "4: 3 stopped 1 done" in text, text
        # The stopped members' budgets beyond their rung are no steps still to train: 1,800 + 600 + 600 + 1,200.
        assert "Steps 4,200 of 4,200" in text, text
        assert_rungs_whole(stored_view(rlsup_home), lines)
