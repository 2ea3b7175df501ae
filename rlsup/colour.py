"""Colour for the CLI's state names: only on a terminal, and never when NO_COLOR is set (no-color.org)."""
from __future__ import annotations

import os
import sys
from typing import TextIO

# SGR codes: what needs the user (failed) stands out, what waits recedes.
STATE_COLOURS = {
    "running": "32", "starting": "32",          # green
    "done": "36",                               # cyan
    "paused": "33", "pausing": "33", "stopping": "33",  # yellow
    "failed": "31", "killed": "31",             # red
    "queued": "2",                              # dim
}


def wanted(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def paint_state(text: str, state: str, enabled: bool) -> str:
    """text (a state name, maybe padded) in its state's colour when enabled."""
    code = STATE_COLOURS.get(state)
    return f"\x1b[{code}m{text}\x1b[0m" if enabled and code else text
