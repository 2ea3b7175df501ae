"""The worker's clock and what its user sees: steps per second, the wall-time budget, a progress bar, the last word."""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path

from rlsup.formatting import stopwatch
from rlsup.run.exit import EXIT_DONE, EXIT_HELD, EXIT_PAUSED, EXIT_WALL_TIME
from rlsup.run.log import FILE_ONLY

log = logging.getLogger("rlsup.worker")

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

    def used_up(self, limit: float) -> bool:
        """Whether [job] max_wall_s (limit; 0 for none) is spent."""
        return limit > 0 and self.total() >= limit

    def used_up_sentence(self, limit: float, step: int, *, already: bool) -> str:
        """Why the run paused at step: already on starting, or with a checkpoint just written."""
        budget = f"the [job] max_wall_s of {limit:g} s of training"
        used = f"used up ({self.total():.1f} s); raise it, then resume"
        if already:
            return f"paused at step {step}: {budget} was already {used}"
        return f"paused at step {step} with a checkpoint: {budget} is {used}"


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



def tell_outcome(code: int, reason: str, run_dir: Path, *, foreground: bool) -> None:
    """How the run ended, in worker.log, and for a foreground run on its terminal with how to go on."""
    if code in (EXIT_DONE, EXIT_PAUSED, EXIT_WALL_TIME, EXIT_HELD):
        log.info(reason)
        if foreground and code == EXIT_PAUSED:
            tell_terminal(f"continue with: rlsup run --resume {run_dir}")
        elif foreground and code == EXIT_WALL_TIME:
            tell_terminal(f"continue with: rlsup run --resume {run_dir} JOB.toml, a JOB.toml that "
                          "raises [job] max_wall_s")
    else:
        log.error("exit %d: %s", code, reason, extra=FILE_ONLY)
        if foreground:
            tell_terminal(f"rlsup: {reason}")


def tell_terminal(text: str) -> None:
    """A line for a foreground run's user; a reader that has gone must not stop the run's exit being recorded."""
    with contextlib.suppress(OSError):  # BrokenPipeError, typically
        print(text, file=sys.stderr, flush=True)
