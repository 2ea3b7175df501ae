"""The detail screen of a fork shows its parent and its lineage, read from the parent.json files of its runs."""
from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from rich.console import Console
from textual.widgets import Static
from rlsup_testing import screen_shown

from rlsup.run import lineage
from rlsup import atomic
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.store import Store
from rlsup.tui.app import RlsupApp
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.screens import DetailScreen

SIZE = (160, 48)


def record_parent(run_dir: Path, parent_run: Path, name: str, job_id: int, step: int) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    parent = lineage.Parent(run_dir=str(parent_run), job_name=name, job_id=job_id, step=step,
                            checkpoint=f"step-{step:012d}", reason="interval", fingerprint="ab" * 32,
                            fresh_optimizer=step == 2_000, replay=True, time=0.0, rlsup_version="0")
    atomic.write_json(run_dir / lineage.PARENT_FILE, dataclasses.asdict(parent))


def plain(renderable) -> str:
    console = Console(width=SIZE[0], file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


async def test_a_forks_details_show_its_parent_and_lineage(rlsup_home: Path, wait_until) -> None:
    runs = rlsup_home / "runs"
    record_parent(runs / "child", runs / "root", "root", 1, 1_000)
    record_parent(runs / "grandchild", runs / "child", "child", 2, 2_000)
    with Store(rlsup_home) as store:
        job = store.submit(name="grandchild", spec_path=rlsup_home / "g.toml", run_dir=runs / "grandchild",
                           algo="dqn", env="CartPole-v1", total_steps=10_000)
    app = RlsupApp(rlsup_home, hardware=FakeHardware(), poll_interval_s=None,
                   daemon_status=lambda home: DaemonStatus(True, 1, home))
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: job.id in app.screen.query_one(JobsTable).rows_shown, what="the job row")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen_shown(app, DetailScreen), what="the detail screen")
        details = plain(app.screen.query_one("#info", Static).content)
    assert "Forked from  job 2 child at step 2,000 (step-000000002000, fingerprint abababababab; " \
           "fresh optimizer)" in details
    assert "job 1 root at step 1,000 → job 2 child at step 2,000 → this" in details
