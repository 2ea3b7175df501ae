"""Small checkpoints written for the checkpoint store's unit tests, and a pid that is surely dead."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from rlsup.checkpoint.store import write_checkpoint


def write(run_dir: Path, state: dict, step: int, *, keep: int = 10, reason: str = "interval", **extra):
    return write_checkpoint(run_dir, state, step=step, episodes=step // 10, reason=reason, fingerprint=f"print-{step}",
                            spec_sha256="spec", metrics_bytes=step * 3, keep=keep, extra=extra or None)


def small_state(value: int) -> dict:
    return {"counter": value, "weights": torch.full((3,), float(value)), "frames": np.full((4, 2), value, np.uint8)}


def dot_entries(run_dir: Path) -> list[str]:
    return sorted(name for name in os.listdir(run_dir / "checkpoints") if name.startswith("."))


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def flip_last_byte(path: Path) -> None:
    with open(path, "r+b") as handle:
        handle.seek(-1, os.SEEK_END)
        value = handle.read(1)[0]
        handle.seek(-1, os.SEEK_END)
        handle.write(bytes([value ^ 0xFF]))
