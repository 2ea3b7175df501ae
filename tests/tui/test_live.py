"""Pilot tests against a real daemon and real CartPole workers: what the user sees after each key."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from rlsup_testing import cartpole_job, screen_shown

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup import client
from rlsup.hardware import FakeHardware
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.screens import ConfirmScreen
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.widgets import CheckpointsTable, DaemonBanner, EventsLog

SIZE = (160, 48)


def shown_state(app: RlsupApp, job_id: int) -> str | None:
    table = app.screen.query_one(JobsTable)
    return table.get_cell(str(job_id), "state").plain if job_id in table.rows_shown else None


def checkpoint_reasons(app: RlsupApp) -> list[str]:
    table = app.screen.query_one(CheckpointsTable)
    return [str(table.get_cell(row.key, "reason")) for row in table.ordered_rows]


def shown_events(app: RlsupApp) -> list[tuple[str, str]]:
    return [(event.kind, event.message) for event in app.screen.query_one(EventsLog).shown]


def report(home: Path, job_id: int) -> str:
    with Store(home) as store:
        job = store.job(job_id)
        lines = [f"job {job_id}: {job.state} ({job.reason})"]
        lines += [f"  {event.kind} {event.to_state or ''} {event.message}" for event in store.events(job_id)]
    lines += runfiles.tail_lines(Path(job.run_dir) / paths.LOG_FILE, 8)
    lines += runfiles.tail_lines(home / paths.DAEMON_LOG, 8)
    return "\n".join(lines)


async def test_pause_resume_and_kill_from_the_keys(daemon_home, job_file, wait_until):
    job = client.submit(job_file(), home=daemon_home)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        explain = lambda: report(daemon_home, job.id)  # noqa: E731
        await wait_until(pilot, lambda: shown_state(app, job.id) == "running", what="the job shown running",
                         report=explain)
        await pilot.press("p")
        await wait_until(pilot, lambda: shown_state(app, job.id) == "paused" and "pause" in checkpoint_reasons(app),
                         what="paused, with a pause checkpoint in the pane", report=explain)
        await pilot.press("r")
        await wait_until(pilot, lambda: shown_state(app, job.id) == "running", what="running again",
                         report=explain)
        await pilot.press("k")
        await wait_until(pilot, lambda: screen_shown(app, ConfirmScreen), what="the kill confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: shown_state(app, job.id) == "killed", what="killed", report=explain)
        await wait_until(pilot, lambda: [kind for kind, _ in shown_events(app)].count("intent") == 3,
                         what="the three intents in the events pane", report=lambda: str(shown_events(app)))


async def test_edits_show_as_applied_and_refused_events(daemon_home, job_file, wait_until, tmp_path, monkeypatch):
    path = job_file()
    job = client.submit(path, home=daemon_home)
    # The editor: a script that raises the budget, run through `e` as $EDITOR would be.
    editor = tmp_path / "editor.py"
    editor.write_text("import sys, pathlib\n"
                      "p = pathlib.Path(sys.argv[1])\n"
                      "p.write_text(p.read_text().replace('total_steps = 200000', 'total_steps = 300000'))\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    monkeypatch.delenv("VISUAL", raising=False)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    # The headless test driver cannot give the terminal away; the editor still runs.
    app.suspend = contextlib.nullcontext
    async with app.run_test(size=SIZE) as pilot:
        explain = lambda: report(daemon_home, job.id)  # noqa: E731
        await wait_until(pilot, lambda: shown_state(app, job.id) == "running", what="the job shown running",
                         report=explain)
        await pilot.press("e")
        await wait_until(pilot, lambda: any(kind == "edit" and "total_steps" in message
                                            for kind, message in shown_events(app)),
                         what="the applied edit in the events pane", report=explain)
        # The daemon records the event, then the new budget: the table may show it a poll later.
        table = app.screen.query_one(JobsTable)
        await wait_until(pilot, lambda: "300k" in table.get_cell(str(job.id), "progress").plain,
                         what="the new budget in the table", report=explain)
        # Written straight to the file, as any editor would: a new seed changes what the run learns.
        path.write_text(path.read_text().replace("seed = 3", "seed = 4"))
        await wait_until(pilot, lambda: any(kind == "refused" and "seed" in message
                                            for kind, message in shown_events(app)),
                         what="the refused edit in the events pane", report=explain)
        # The refused seed still in the file, and a new budget: the budget applies, and the pane names both.
        path.write_text(path.read_text().replace("total_steps = 300000", "total_steps = 400000"))
        await wait_until(pilot, lambda: any(kind == "refused" and "job.seed" in message
                                            and "job.total_steps: 300000 -> 400000" in message
                                            for kind, message in shown_events(app))
                         and any(kind == "edit" and "job.total_steps: 300000 -> 400000" in message
                                 and "job.seed" in message for kind, message in shown_events(app)),
                         what="the save's refused and applied fields, both named", report=explain)
        await wait_until(pilot, lambda: "400k" in table.get_cell(str(job.id), "progress").plain,
                         what="the applied budget in the table", report=explain)


async def test_banner_while_the_daemon_is_down_and_D_starts_it(daemon_home, wait_until):
    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        banner = app.screen.query_one(DaemonBanner)
        await wait_until(pilot, lambda: banner.has_class("-down"), what="the banner")
        await pilot.press("D")
        await wait_until(pilot, lambda: not banner.has_class("-down"), what="the daemon started by D")
        client.stop_daemon(daemon_home)  # and it comes back: the TUI carries on with the new one
        await wait_until(pilot, lambda: banner.has_class("-down"), what="the banner again")
        await pilot.press("D")
        await wait_until(pilot, lambda: not banner.has_class("-down"), what="the restarted daemon")



def checkpoint_marks(app: RlsupApp) -> dict[str, str]:
    """The reason of each checkpoint row that carries a mark ("newest", "★ best")."""
    table = app.screen.query_one(CheckpointsTable)
    cells = [(str(table.get_cell(row.key, "newest")), str(table.get_cell(row.key, "reason")))
             for row in table.ordered_rows]
    return {mark: reason for mark, reason in cells if mark}


async def test_best_checkpoint_is_marked_beside_the_newest(daemon_home, tmp_path, wait_until):
    job = client.submit(cartpole_job(tmp_path, seed=3, total_steps=200_000, checkpoint_every=100_000,
                                     eval_every=500), home=daemon_home)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        explain = lambda: report(daemon_home, job.id) + f"\nmarks: {checkpoint_marks(app)}"  # noqa: E731
        await wait_until(pilot, lambda: checkpoint_marks(app).get("★ best", "").startswith("best "),
                         what="a best checkpoint marked in the pane", report=explain)
        await pilot.press("p")
        # The pause checkpoint is where a resume starts; the best keeps its own mark beside it.
        await wait_until(pilot, lambda: checkpoint_marks(app).get("newest") == "pause"
                         and "★ best" in checkpoint_marks(app), what="newest on the pause checkpoint, best kept",
                         report=explain)
