"""Panes that stay true over time: the log follows its file, waits say why, a refused edit stays marked."""
from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rlsup_testing import cartpole_job, run_rlsup

from rlsup import paths
from rlsup import client
from rlsup.client import DaemonStatus
from rlsup.formatting import GIB
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.jobs.store import Process, Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.logtail import LogTail
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.widgets import EventsLog, HardwareStrip

SIZE = (160, 48)


def plain(renderable) -> str:
    console = Console(width=SIZE[0], file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def visible_lines(log: LogTail) -> list[str]:
    top = round(log.scroll_offset.y)
    return [strip.text.rstrip() for strip in log.lines[top:top + log.scrollable_content_region.height]]


def append_lines(path: Path, first: int, count: int) -> None:
    with path.open("a") as file:
        file.writelines(f"line {number}\n" for number in range(first, first + count))


async def test_the_log_pane_follows_the_file_end_unless_scrolled_up(rlsup_home, wait_until):
    run_dir = rlsup_home / "runs" / "tail"
    run_dir.mkdir(parents=True)
    log_file = run_dir / paths.LOG_FILE
    append_lines(log_file, 0, 60)
    with Store(rlsup_home) as store:
        store.submit(name="tail", spec_path=rlsup_home / "tail.toml", run_dir=run_dir, algo="dqn",
                     env="CartPole-v1", total_steps=10_000)

    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(True, 1, home))
    async with app.run_test(size=SIZE) as pilot:
        log = app.screen.query_one(LogTail)
        await wait_until(pilot, lambda: visible_lines(log)[-1:] == ["line 59"], what="the newest line at the bottom",
                         report=lambda: str(visible_lines(log)))
        for first in (60, 80, 300):  # the last batch is longer than the tail the poller reads
            append_lines(log_file, first, 20 if first < 300 else 250)
            app.poll_now()
            newest = f"line {first + (19 if first < 300 else 249)}"
            await wait_until(pilot, lambda: visible_lines(log)[-1:] == [newest],
                             what=f"{newest} at the bottom", timeout=10, report=lambda: str(visible_lines(log)))
        log.scroll_to(y=log.scroll_offset.y - 10, animate=False, immediate=True)
        await pilot.pause()
        shown = visible_lines(log)
        append_lines(log_file, 600, 5)
        app.poll_now()
        await wait_until(pilot, lambda: log.shown[-1] == "line 604", what="the new lines read",
                         report=lambda: str(log.shown[-3:]))
        await pilot.pause()
        assert visible_lines(log) == shown  # the reader keeps their place, as in tail -f's pagers
        log.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        append_lines(log_file, 605, 3)
        app.poll_now()
        await wait_until(pilot, lambda: visible_lines(log)[-1:] == ["line 607"], what="following again",
                         report=lambda: str(visible_lines(log)))


def state_cell(app: RlsupApp, job_id: int) -> str:
    table = app.screen.query_one(JobsTable)
    return table.get_cell(str(job_id), "state").plain if job_id in table.rows_shown else ""


def shown_events(app: RlsupApp) -> list[tuple[str, str]]:
    return [(event.kind, event.message) for event in app.screen.query_one(EventsLog).shown]


async def test_a_job_waiting_for_a_gpu_says_why_in_the_table_and_the_events(daemon_home, tmp_path, wait_until,
                                                                       monkeypatch):
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "0")  # the daemon, started by submit, inherits it
    job = client.submit(cartpole_job(tmp_path, gpus=1, total_steps=10_000), home=daemon_home)

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: "queued: held: needs 1 GPU" in state_cell(app, job.id),
                         what="the waiting reason in the state cell", report=lambda: state_cell(app, job.id))
        await wait_until(pilot, lambda: any("needs 1 GPU; this machine has 0" in message
                                            for _, message in shown_events(app)),
                         what="the waiting reason in the events", report=lambda: str(shown_events(app)))
        await pilot.pause(1.0)  # many scheduler rounds later, the reason is still recorded once
        assert sum("needs 1 GPU" in message for _, message in shown_events(app)) == 1


async def test_a_refused_edit_stays_marked_until_file_and_run_agree(daemon_home, tmp_path, wait_until):
    path = cartpole_job(tmp_path, total_steps=400_000, lr="1e-3")
    job = client.submit(path, home=daemon_home)
    original = path.read_text()

    app = RlsupApp(daemon_home, hardware=FakeHardware())
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: state_cell(app, job.id).startswith("running"), what="running",
                         report=lambda: state_cell(app, job.id))
        path.write_text(original.replace("lr = 1e-3", "lr = 5e-4"))
        await wait_until(pilot, lambda: "file differs from run: dqn.lr refused" in state_cell(app, job.id),
                         what="the refused-edit marker", report=lambda: state_cell(app, job.id))
        status = run_rlsup("status", str(job.id))
        assert "file differs from run: dqn.lr refused" in status.stdout, status.stdout + status.stderr
        path.write_text(original)
        await wait_until(pilot, lambda: state_cell(app, job.id) == "running", what="the marker gone",
                         report=lambda: state_cell(app, job.id))


async def test_the_hardware_pane_shows_each_job_on_its_gpu_with_the_memory_it_is_packed_by(rlsup_home, wait_until):
    with Store(rlsup_home) as store:
        job = store.submit(name="pong", spec_path=rlsup_home / "pong.toml", run_dir=rlsup_home / "runs" / "pong",
                           algo="dqn", env="ALE/Pong-v5", total_steps=10_000, gpus_wanted=1, gpu_memory_gb=2.5)
        store.transition(job.id, State.STARTING, "started", process=Process(gpus=(0,), pid=4242))
    app = RlsupApp(rlsup_home, hardware=FakeHardware(gpus=1, gpu_memory_bytes=80 * GIB), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(True, 1, home))
    async with app.run_test(size=SIZE) as pilot:
        app.poller.hardware_every_s = 0.0  # a sample at every poll, so that each change shows at the next one
        strip = app.screen.query_one(HardwareStrip)
        gpu_line = lambda: next(line for line in plain(strip.content).splitlines() if line.startswith("GPU0"))
        # Declared: packed by its 2.5 GiB until its worker reports more.
        await wait_until(pilot, lambda: "→ 1 pong 2.5 GiB" in gpu_line(), what="the declared figure",
                         report=gpu_line)
        assert "mem 2.0 GiB / 80.0 GiB" in gpu_line()  # the GPU's own, as NVML (here the fake) counts it
        with Store(rlsup_home) as store:
            store.update(job.id, gpu_memory_bytes=int(3.1 * GIB))
        app.poll_now()
        await wait_until(pilot, lambda: "→ 1 pong 3.1 GiB" in gpu_line(), what="the reported figure", report=gpu_line)
        with Store(rlsup_home) as store:
            store.transition(job.id, State.PAUSING, "pause requested")
            store.transition(job.id, State.PAUSED, "paused")
        app.poll_now()
        await wait_until(pilot, lambda: gpu_line().endswith("→ free"), what="the GPU freed", report=gpu_line)
