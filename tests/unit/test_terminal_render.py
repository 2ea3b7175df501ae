"""Half-block terminal frames: exact characters and escape codes for tiny synthetic frames."""
from __future__ import annotations

import io

import numpy as np

from rlsup.terminal_render import TerminalPlayer, fit, frame_lines

RED, BLUE, WHITE, BLACK = (255, 0, 0), (0, 0, 255), (255, 255, 255), (0, 0, 0)


def cell(upper, lower) -> str:
    return "\x1b[38;2;{};{};{}m\x1b[48;2;{};{};{}m\u2580".format(*upper, *lower)


def test_one_cell_shows_two_pixel_rows():
    frame = np.array([[RED], [BLUE]], dtype=np.uint8)
    assert frame_lines(frame, columns=80, lines=24) == [cell(RED, BLUE) + "\x1b[0m"]


def test_an_odd_last_row_gets_a_black_lower_half():
    frame = np.array([[RED, WHITE], [BLUE, BLUE], [WHITE, RED]], dtype=np.uint8)
    assert frame_lines(frame, columns=80, lines=24) == [cell(RED, BLUE) + cell(WHITE, BLUE) + "\x1b[0m",
                                                       cell(WHITE, BLACK) + cell(RED, BLACK) + "\x1b[0m"]


def test_a_large_frame_shrinks_to_the_terminal_keeping_its_aspect():
    frame = np.zeros((210, 160, 3), dtype=np.uint8)
    assert fit(frame, columns=80, lines=24).shape == (48, 36, 3)
    assert fit(frame, columns=40, lines=100).shape == (52, 40, 3)
    lines = frame_lines(frame, columns=80, lines=24)
    assert len(lines) == 24 and all(line.count("\u2580") == 36 for line in lines)


def test_the_player_redraws_from_home_and_restores_the_terminal():
    stream = io.StringIO()
    player = TerminalPlayer(fps=0, stream=stream, terminal_size=lambda: (80, 24))
    frame = np.array([[RED], [BLUE]], dtype=np.uint8)
    player(frame)
    player(frame)
    player.close()
    text = stream.getvalue()
    assert text.startswith("\x1b[?25l\x1b[2J") and text.count("\x1b[H" + cell(RED, BLUE)) == 2
    assert text.endswith("\x1b[0m\x1b[?25h")
