"""Redraw docs/tui.svg from a real daemon training real jobs: `python docs/screenshot.py [seconds]`."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "tui.svg"
# The jobs a new user meets first; MinAtar only where its extra is installed.
JOBS = ("cartpole-dqn.toml", "cartpole-vtrace.toml", "minatar-breakout-dqn.toml")
SIZE = (160, 48)


def rlsup(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlsup.cli", *arguments], capture_output=True, text=True,
                          check=True)


def submit_jobs() -> list[str]:
    submitted = []
    for name in JOBS:
        result = subprocess.run([sys.executable, "-m", "rlsup.cli", "submit", str(ROOT / "jobs" / name)],
                                capture_output=True, text=True)
        if result.returncode == 0:
            submitted.append(result.stdout.strip())
        else:
            print(f"skipped {name}: {result.stderr.strip().splitlines()[-1]}", file=sys.stderr)
    return submitted


async def draw(home: Path) -> None:
    from rlsup.tui.app import RlsupApp

    app = RlsupApp(home)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + 30
        while not (app.model.metrics and app.model.checkpoints) and time.monotonic() < deadline:
            await pilot.pause(0.2)
        await pilot.pause(2.0)  # a hardware sample and the verified marks
        app.save_screenshot(filename=OUTPUT.name, path=str(OUTPUT.parent))


def main() -> int:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    with tempfile.TemporaryDirectory(prefix="rlsup-screenshot-") as home:
        os.environ["RLSUP_HOME"] = home
        job_ids = submit_jobs()
        try:
            time.sleep(seconds)
            rlsup("pause", job_ids[-1])  # one paused job, to show a pause checkpoint and its event
            time.sleep(5)
            asyncio.run(draw(Path(home)))
        finally:
            for job_id in job_ids:
                subprocess.run([sys.executable, "-m", "rlsup.cli", "kill", job_id], capture_output=True)
            time.sleep(3)
            subprocess.run([sys.executable, "-m", "rlsup.cli", "daemon", "stop"], capture_output=True)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
