"""Frames drawn in the terminal for `rlsup enjoy --render terminal`: half-block characters in 24-bit colour."""
from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

import numpy as np

from rlsup.render_frames import enlarged, rgb_bytes

UPPER_HALF = "\u2580"  # ▀: its foreground paints a cell's upper pixel, its background the lower one
RESET = "\x1b[0m"
HOME = "\x1b[H"
CLEAR = "\x1b[2J"
HIDE_CURSOR = "\x1b[?25l"
SHOW_CURSOR = "\x1b[?25h"
# Lines left free below the frame for the episode reports and the shell prompt.
SPARE_LINES = 2


def fit(frame: np.ndarray, columns: int, lines: int) -> np.ndarray:
    """The frame shrunk (nearest pixel, aspect kept) to at most columns wide and 2 * lines tall.

    A frame smaller than that is enlarged by the largest whole factor that fits: MinAtar's 10×10 would
    otherwise be a speck of 10 cells, and a whole factor keeps its cells square and sharp."""
    height, width = frame.shape[:2]
    scale = min(columns / width, 2 * lines / height)
    if scale >= 1:
        return enlarged(frame, int(scale))
    rows = np.minimum((np.arange(max(1, int(height * scale))) / scale).astype(int), height - 1)
    cols = np.minimum((np.arange(max(1, int(width * scale))) / scale).astype(int), width - 1)
    return frame[rows][:, cols]


def frame_lines(frame: np.ndarray, columns: int, lines: int) -> list[str]:
    """An RGB frame (height, width, 3) as terminal lines: each character cell shows two pixel rows."""
    pixels = fit(rgb_bytes(frame), columns, lines)
    if len(pixels) % 2:  # an odd last row gets a black lower half
        pixels = np.concatenate([pixels, np.zeros_like(pixels[:1])])
    return [cell_row(pixels[index], pixels[index + 1]) for index in range(0, len(pixels), 2)]


def cell_row(upper: np.ndarray, lower: np.ndarray) -> str:
    cells = []
    for (red, green, blue), (red_below, green_below, blue_below) in zip(upper.tolist(), lower.tolist()):
        cells.append(f"\x1b[38;2;{red};{green};{blue}m\x1b[48;2;{red_below};{green_below};{blue_below}m"
                     + UPPER_HALF)
    return "".join(cells) + RESET


class TerminalPlayer:
    """Receives frames (the on_frame of play_episodes) and redraws them in place at fps (0: unpaced)."""

    def __init__(self, fps: float, stream: TextIO | None = None,
                 terminal_size: Callable[[], tuple[int, int]] = lambda: tuple(shutil.get_terminal_size())):
        self.interval = 1.0 / fps if fps > 0 else 0.0
        self.stream = stream or sys.stdout
        self.terminal_size = terminal_size
        self.next_time: float | None = None

    def __call__(self, frame: np.ndarray | None) -> None:
        if frame is None:
            return
        if self.next_time is None:
            # Set first: a Ctrl-C that lands as the write returns must still find close() restoring.
            self.next_time = time.monotonic()
            self.stream.write(HIDE_CURSOR + CLEAR)
        columns, lines = self.terminal_size()
        drawn = frame_lines(frame, columns, max(1, lines - SPARE_LINES))
        self.stream.write(HOME + "\n".join(drawn) + "\n")
        self.stream.flush()
        self.wait_for_next_frame()

    def wait_for_next_frame(self) -> None:
        # A schedule, not a fixed sleep: drawing time is paid out of the frame's interval.
        self.next_time += self.interval
        delay = self.next_time - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            self.next_time = time.monotonic()  # fell behind: go on from now rather than rush to catch up

    def close(self) -> None:
        """Give the terminal back its colours and cursor (also after Ctrl-C)."""
        if self.next_time is not None:
            self.stream.write(RESET + SHOW_CURSOR)
            self.stream.flush()
