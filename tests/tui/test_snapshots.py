"""Snapshots of the main and detail screens from a recorded CartPole run, fake hardware and a fixed clock."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from rlsup.run.status import WorkerStatus, write_worker_status
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.jobs.store import Process, Store
from rlsup.tui.app import RlsupApp

# A real `rlsup run` of a CartPole DQN job, paused at step 43,776; status.json was copied while it ran.
RECORDED = Path(__file__).parent / "fixtures" / "cartpole-run"
RECORDED_PID = 16375
NOW = 1795309540.0  # just after the recording ended
SIZE = (160, 48)


def add_job(store: Store, home: Path, name: str, env: str, total_steps: int, *, states=(), step=0, priority=0,
            status: dict | None = None, **columns) -> int:
    """A job walked through the given states, with a run directory holding only its status.json."""
    run_dir = home / "runs" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    job = store.submit(name=name, spec_path=Path(f"/home/ada/jobs/{name}.toml"), run_dir=run_dir,
                       algo="vtrace" if "vtrace" in name else "dqn", env=env, total_steps=total_steps,
                       priority=priority)
    for state, reason in states:
        store.transition(job.id, state, reason)
    store.update(job.id, step=step, **columns)
    if status is not None:
        write_worker_status(run_dir, WorkerStatus.from_json(status))
    return job.id


def fill_store(store: Store, home: Path) -> None:
    started, running = (State.STARTING, "started"), (State.RUNNING, "worker reports status")
    run_dir = home / "runs" / "cartpole-dqn-20261122-010352-5f3a"
    shutil.copytree(RECORDED, run_dir)
    job = store.submit(name="cartpole-dqn", spec_path=Path("/home/ada/jobs/cartpole-dqn.toml"), run_dir=run_dir,
                       algo="dqn", env="CartPole-v1", total_steps=50_000)
    store.transition(job.id, *started, process=Process(pid=RECORDED_PID))
    store.transition(job.id, *running)
    add_job(store, home, "pong-dqn", "ALE/Pong-v5", 10_000_000, states=(started, running), step=2_400_000,
            process=Process((0,), 4242), status={"pid": 4242, "step": 2_412_544, "steps_per_second": 1843.0,
                                        "mean_return": 14.2})
    add_job(store, home, "breakout-dqn", "ALE/Breakout-v5", 10_000_000, priority=5)
    add_job(store, home, "seaquest-dqn", "ALE/Seaquest-v5", 10_000_000)
    add_job(store, home, "lunar-dqn", "LunarLander-v3", 500_000, step=180_000,
            states=(started, running, (State.PAUSING, "pause requested"), (State.PAUSED, "paused with a checkpoint")),
            status={"pid": 7, "step": 180_000, "mean_return": 61.7})
    add_job(store, home, "cartpole-vtrace", "CartPole-v1", 200_000, step=200_000,
            states=(started, running, (State.STOPPING, "budget reached"),
                    (State.DONE, "budget reached at step 200000")),
            status={"pid": 8, "step": 200_000, "mean_return": 498.3})
    add_job(store, home, "acrobot-dqn", "Acrobot-v1", 100_000, step=31_250,
            states=(started, running, (State.FAILED, "exit code 1; no restarts left (max_restarts = 3)")))
    store.add_event(job.id, "refused", "seed: 3 -> 4 changes what the run learns (identity); "
                                       "start a new job for it")
    store.add_event(job.id, "edit", "applied: log.every_steps 1000 -> 500")
    # Every time the screens show, on the fixed clock: each event 40 s after the one before.
    last = store.connection.execute("SELECT max(id) FROM events").fetchone()[0]
    store.connection.execute("UPDATE events SET time = ? - (? - id) * 40", (NOW, last))
    store.connection.execute("UPDATE jobs SET submitted = ? - 3600 + id * 60, started = ? - 200, updated = ?",
                             (NOW, NOW, NOW))


@pytest.fixture
def recorded_home(rlsup_home: Path):
    previous = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"  # times on screen are local times
    time.tzset()
    with Store(rlsup_home) as store:
        fill_store(store, rlsup_home)
    try:
        yield rlsup_home
    finally:
        if previous is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = previous
        time.tzset()


def recorded_app(home: Path) -> RlsupApp:
    hardware = FakeHardware(cores=16, gpus=2, cpu_percent=37.5, memory_used_bytes=int(11.2 * (1 << 30)),
                            memory_total_bytes=32 << 30, clock=lambda: NOW)
    # No poll thread: the test polls on the UI thread, so every screen sees exactly the same data.
    return RlsupApp(home, hardware=hardware, poll_interval_s=None,
                    daemon_status=lambda home: DaemonStatus(True, 4000, home))


async def settle(pilot) -> None:
    """Until the selected job's plot and checkpoints are in, every checkpoint verified."""
    app = pilot.app
    deadline = time.monotonic() + 30
    while not (app.model.metrics and app.model.checkpoints and not app.verifying
               and all(str(entry.path) in app.model.verified for entry in app.model.checkpoints)):
        assert time.monotonic() < deadline, "the recorded run never settled on screen"
        await pilot.pause(0.05)
    await pilot.pause()


def test_main_screen(snap_compare, recorded_home):
    assert snap_compare(recorded_app(recorded_home), terminal_size=SIZE, run_before=settle)


def test_main_screen_at_100_by_30(snap_compare, recorded_home):
    """The compact layout: every column header, Size and Verified, and the footer's Quit in view."""
    assert snap_compare(recorded_app(recorded_home), terminal_size=(100, 30), run_before=settle)


def test_detail_screen(snap_compare, recorded_home):
    assert snap_compare(recorded_app(recorded_home), terminal_size=SIZE, run_before=settle, press=["enter"])


def test_detail_screen_at_100_by_30(snap_compare, recorded_home):
    """Compact: the body scrolls, so the plots keep 16 rows; the fields fit three to a row."""
    assert snap_compare(recorded_app(recorded_home), terminal_size=(100, 30), run_before=settle, press=["enter"])
