"""A foreground `rlsup run` in the jobs table, read-only, and a feature a worker switched off as an event."""
from __future__ import annotations

import io
import os
import subprocess

from rich.console import Console
from textual.widgets import Static
from rlsup_testing import cartpole_job, cartpole_text, path_hiding, rlsup_command, run_rlsup, screen_shown

from rlsup import client
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.screens import ConfirmScreen, DetailScreen
from rlsup.tui.widgets import EventsLog

SIZE = (160, 48)


def cell(app: RlsupApp, key: str, column: str) -> str:
    table = app.screen.query_one(JobsTable)
    return table.get_cell(key, column).plain if int(key) in table.rows_shown else ""


def plain(renderable) -> str:
    console = Console(width=SIZE[0], file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def said_by(app: RlsupApp) -> list[str]:
    """Every notification the app shows from now on."""
    said: list[str] = []
    notify = app.notify
    app.notify = lambda message, **options: (said.append(message), notify(message, **options))[1]
    return said


async def test_a_foreground_run_is_shown_read_only_and_its_keys_say_what_to_do(rlsup_home, tmp_path, wait_until):
    job_file = cartpole_job(tmp_path, name="fg-cartpole", total_steps=10_000_000)
    with open(tmp_path / "run.out", "w") as output:
        process = subprocess.Popen(rlsup_command("run", job_file, "--run-dir", tmp_path / "run"), stdout=output,
                                   stderr=subprocess.STDOUT, env=os.environ.copy())
    key = str(-process.pid)
    try:
        app = RlsupApp(rlsup_home, hardware=FakeHardware(), daemon_status=lambda home: DaemonStatus(False, None, home))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: cell(app, key, "state").startswith("running foreground"),
                             what="the foreground run in the table", report=lambda: cell(app, key, "state"))
            assert cell(app, key, "id") == "fg" and cell(app, key, "name") == "fg-cartpole"
            said = said_by(app)
            for press, advice in (("p", "press Ctrl-C in its terminal to pause it"),
                                  ("k", "press Ctrl-C twice in its terminal"),
                                  ("r", f"rlsup run --resume {tmp_path / 'run'}"),
                                  ("e", f"rlsup run --resume {tmp_path / 'run'} JOB.toml")):
                await pilot.press(press)
                await pilot.pause()
                assert any("is a foreground run" in text and advice in text for text in said), (press, said)
            assert not isinstance(app.screen, ConfirmScreen)  # kill asks nothing: it does nothing
            await pilot.press("enter")
            await wait_until(pilot, lambda: screen_shown(app, DetailScreen), what="the detail screen")
            details = plain(app.screen.query_one("#info", Static).content)
            assert "fg fg-cartpole" in details and f"pid {process.pid}): Ctrl-C in its terminal" in details
            await pilot.press("escape")
            assert process.poll() is None  # and no key signalled the run
            process.kill()
            process.wait(timeout=30)
            await wait_until(pilot, lambda: int(key) not in app.screen.query_one(JobsTable).rows_shown,
                             what="the killed run gone from the table", timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


async def test_tensorboard_missing_is_an_event_in_status_and_the_events_pane(daemon_home, tmp_path, wait_until,
                                                                             monkeypatch):
    # The daemon (started by submit) and its workers inherit a PYTHONPATH on which tensorboard cannot import.
    monkeypatch.setenv("PYTHONPATH", path_hiding(tmp_path / "hidden", "tensorboard"))
    path = tmp_path / "tensorboard.toml"
    path.write_text(cartpole_text(total_steps=400_000).replace("[log]\n", "[log]\ntensorboard = true\n"))
    job = client.submit(path, home=daemon_home)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        def shown():
            return [event.message for event in app.screen.query_one(EventsLog).shown if event.kind == "feature off"]
        await wait_until(pilot, lambda: any("tensorboard is not installed" in message for message in shown()),
                         what="the switched-off feature in the events pane", report=lambda: str(shown()))
        await pilot.pause(1.0)  # the worker says it in every status.json: the event is still there once
        assert len(shown()) == 1
        await wait_until(pilot, lambda: app.model.row(job.id).job.state is State.RUNNING,
                         what="training going on without it")

    status = run_rlsup("status", str(job.id))
    line = next((line for line in status.stdout.splitlines() if "feature off" in line), "")
    assert "[log] tensorboard = true but tensorboard is not installed" in line, status.stdout
    assert "pip install tensorboard" in line
