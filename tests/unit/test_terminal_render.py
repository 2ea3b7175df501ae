"""Half-block terminal frames: exact characters and escape codes for tiny synthetic frames."""
from __future__ import annotations

import io

import numpy as np

from rlsup.frames import TerminalPlayer, fit, frame_lines

RED, BLUE, WHITE, BLACK = (255, 0, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0)


def cell(upper, lower) -> str:
    return "\x1b[38;2;{};{};{}m\x1b[48;2;{};{};{}m\u2580".format(*upper, *lower)


def test_one_cell_shows_two_pixel_rows():
    frame = np.array([[RED], [BLUE]], dtype=np.uint8)
    assert frame_lines(frame, columns=1, lines=1) == [cell(RED, BLUE) + "\x1b[0m"]


def test_an_odd_last_row_gets_a_black_lower_half():
    frame = np.array([[RED, WHITE], [BLUE, BLUE], [WHITE, RED]], dtype=np.uint8)
    assert frame_lines(frame, columns=2, lines=2) == [cell(RED, BLUE) + cell(WHITE, BLUE) + "\x1b[0m",
                                                       cell(WHITE, BLACK) + cell(RED, BLACK) + "\x1b[0m"]


def test_a_large_frame_shrinks_to_the_terminal_keeping_its_aspect():
    frame = np.zeros((210, 160, 3), dtype=np.uint8)
    assert fit(frame, columns=80, lines=24).shape == (48, 36, 3)
    assert fit(frame, columns=40, lines=100).shape == (52, 40, 3)
    lines = frame_lines(frame, columns=80, lines=24)
    assert len(lines) == 24 and all(line.count("\u2580") == 36 for line in lines)


def test_the_player_redraws_from_home_and_restores_the_terminal():
    stream = io.StringIO()
    player = TerminalPlayer(fps=0, stream=stream, terminal_size=lambda: (1, 3))  # the frame's own size
    frame = np.array([[RED], [BLUE]], dtype=np.uint8)
    player(frame)
    player(frame)
    player.close()
    text = stream.getvalue()
    assert text.startswith("\x1b[?25l\x1b[2J") and text.count("\x1b[H" + cell(RED, BLUE)) == 2
    assert text.endswith("\x1b[0m\x1b[?25h")


def test_a_small_float_frame_is_enlarged_by_a_whole_factor_in_its_colours():
    """MinAtar's frames: float64 on [0, 1], 10×10. A cast to uint8 drew them black, at 10 cells wide."""
    frame = np.zeros((10, 10, 3))
    frame[0, 0] = (1.0, 0.0, 0.0)
    lines = frame_lines(frame, columns=80, lines=24)
    assert len(lines) == 20 and all(line.count("\u2580") == 40 for line in lines)  # ×4: 48 rows would not fit
    assert lines[0].startswith(cell(RED, RED) * 4) and lines[2].startswith(cell(BLACK, BLACK))
