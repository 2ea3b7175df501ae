"""Frames as `rlsup enjoy` shows them: RGB bytes large enough to see, for an mp4 or the terminal's half-blocks."""
from __future__ import annotations

import shutil
import sys
import time
from typing import Callable, TextIO

import numpy as np

# The smaller side a video frame is enlarged to at least: MinAtar's 10×10 becomes 160×160, as wide as Atari's.
VIDEO_MIN_SIDE = 160


def rgb_bytes(frame: np.ndarray) -> np.ndarray:
    """frame as (height, width, 3) uint8, whatever the env drew.

    MinAtar draws float64 in [0, 1], which a plain cast to uint8 turns black; a float frame with values
    past 1 is taken to be on 0-255 already. A grey frame (height, width) gets three equal channels."""
    frame = np.asarray(frame)
    if frame.dtype == np.bool_:
        frame = frame.astype(np.float64)
    if frame.dtype.kind == "f":
        scale = 255.0 if frame.size and np.nanmax(frame) <= 1.0 else 1.0
        frame = np.clip(np.nan_to_num(frame * scale), 0, 255).round()
    frame = frame.astype(np.uint8)
    if frame.ndim == 2:
        frame = np.repeat(frame[..., None], 3, axis=2)
    return np.ascontiguousarray(frame[..., :3])


def enlarged(frame: np.ndarray, factor: int) -> np.ndarray:
    """Each pixel as a factor × factor block: a small frame made visible without blurring its cells."""
    return frame if factor <= 1 else np.repeat(np.repeat(frame, factor, axis=0), factor, axis=1)


def video_frame(frame: np.ndarray) -> np.ndarray:
    """An RGB frame for the mp4, enlarged by a whole factor until its smaller side reaches VIDEO_MIN_SIDE."""
    frame = rgb_bytes(frame)
    smaller = min(frame.shape[:2]) or 1
    return enlarged(frame, -(-VIDEO_MIN_SIDE // smaller))


# ---------------------------------------------------------------------------------------------
# Drawn in the terminal (`--render terminal`): half-block characters in 24-bit colour

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
