"""The worker's clock and progress line: steps per second, when status is due, a one-line bar with ETA."""
from __future__ import annotations

import sys
import time

from rlsup.formatting import stopwatch

STATUS_INTERVAL_S = 1.0
PROGRESS_INTERVAL_S = 0.25


class LoopClock:
    """Steps per second over recent intervals, and when status and progress are due."""

    def __init__(self, step: int):
        now = time.monotonic()
        self.rate = 0.0
        self.status_time = self.progress_time = self.window_time = self.rate_time = now
        self.window_step = self.rate_step = step

    def due_for_status(self, step: int) -> bool:
        """True about once a second; also refreshes the steps/s that status and progress show."""
        now = time.monotonic()
        if now - self.status_time < STATUS_INTERVAL_S:
            return False
        self.rate = (step - self.rate_step) / (now - self.rate_time)
        self.status_time = self.rate_time = now
        self.rate_step = step
        return True

    def due_for_progress(self) -> bool:
        now = time.monotonic()
        if now - self.progress_time < PROGRESS_INTERVAL_S:
            return False
        self.progress_time = now
        return True

    def window_rate(self, step: int) -> float:
        """Steps per second since the previous call (one log interval)."""
        now = time.monotonic()
        rate = (step - self.window_step) / max(now - self.window_time, 1e-9)
        self.window_time, self.window_step = now, step
        return round(rate, 2)


class TrainingTime:
    """Wall seconds a run has trained: those its resumed checkpoint records, plus this session's so far.

    Counted per trajectory, like steps: a crash restart from an older checkpoint takes that checkpoint's
    figure, so [job] max_wall_s bounds the training a run's result cost, not the time its processes lived.
    """

    def __init__(self, before: float = 0.0):
        self.before = before
        self.started: float | None = None

    def start(self) -> None:
        """Count from now: set-up and loading a checkpoint are not training."""
        self.started = time.monotonic()

    def total(self) -> float:
        return self.before + (time.monotonic() - self.started if self.started is not None else 0.0)


class ProgressLine:
    """A one-line progress bar with steps/s and ETA, redrawn in place on a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.visible = False

    def show(self, step: int, total: int, rate: float, mean_return: float | None) -> None:
        fraction = min(step / total, 1.0)
        bar = "#" * int(fraction * 30)
        eta = stopwatch((total - step) / rate) if rate > 0 else "?"
        returns = f"  return {mean_return:.1f}" if mean_return is not None else ""
        sys.stderr.write(f"\r\033[K[{bar:<30}] {step:,}/{total:,} {fraction:6.1%}  "
                         f"{rate:,.0f} steps/s  ETA {eta}{returns}")
        sys.stderr.flush()
        self.visible = True

    def clear(self) -> None:
        if self.visible:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            self.visible = False

