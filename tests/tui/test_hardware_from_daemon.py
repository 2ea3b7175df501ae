"""The hardware strip shows the machine the daemon sees (issue 50 item 5): GPUs it was told to fake, and its
last reading when it stopped; the TUI's own reading only where no daemon ever recorded one."""
from __future__ import annotations

import io

from rich.console import Console

from rlsup import client
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware, Hardware
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.widgets import HardwareStrip

SIZE = (120, 40)


def strip_text(app: RlsupApp) -> str:
    console = Console(width=SIZE[0], file=io.StringIO(), record=True)
    console.print(app.screen.query_one(HardwareStrip).content)
    return console.export_text()


async def test_a_tui_without_the_fake_gpus_switch_shows_the_daemons_gpus(daemon_home, wait_until, monkeypatch):
    """issue 50 item 5: a TUI started without RLSUP_FAKE_GPUS said "no GPU found" beside jobs on GPUs 0 and 1."""
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "2")
    client.ensure_daemon(daemon_home)  # the daemon, started with the switch
    monkeypatch.delenv("RLSUP_FAKE_GPUS")  # the TUI, started without it
    app = RlsupApp(daemon_home)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "GPU1 fake GPU" in strip_text(app), what="the daemon's two GPUs",
                         timeout=60, report=lambda: strip_text(app))
        assert "no GPU" not in strip_text(app)


async def test_the_daemons_last_reading_says_so_once_it_stopped(rlsup_home, wait_until):
    with Store(rlsup_home) as store:
        store.add_hardware_sample(Hardware(fake_gpus=2).sample().to_dict())
    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(False, None, home))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "GPU1 fake GPU" in strip_text(app), what="the daemon's GPUs",
                         report=lambda: strip_text(app))
        assert "the daemon's last reading" in strip_text(app), strip_text(app)


async def test_without_a_daemons_reading_the_tui_reads_its_own_machine(rlsup_home, wait_until):
    app = RlsupApp(rlsup_home, hardware=FakeHardware(gpus=0), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(False, None, home))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "no GPU found" in strip_text(app), what="its own reading",
                         report=lambda: strip_text(app))
