"""Colour for the CLI's state names: only on a terminal, and never when NO_COLOR is set (no-color.org)."""
from __future__ import annotations

import os
import sys
from typing import TextIO

from rlsup.jobs.state import State

# Each state's style, as Rich names it: the TUI uses these directly, the CLI through SGR_CODES. What needs
# the user (failed) stands out in bold red; a worker at work is green, a pause on its way yellow.
STATE_STYLES = {
    State.RUNNING: "bold green", State.STARTING: "green", State.PAUSING: "yellow", State.STOPPING: "yellow",
    State.QUEUED: "cyan", State.PAUSED: "magenta", State.DONE: "blue", State.FAILED: "bold red",
    State.KILLED: "red",
}
SGR_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "blue": "34", "magenta": "35",
             "cyan": "36"}


def wanted(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def paint_state(text: str, state: State, enabled: bool) -> str:
    """text (a state name, maybe padded) in its state's colour when enabled."""
    style = STATE_STYLES.get(state)
    if not (enabled and style):
        return text
    codes = ";".join(SGR_CODES[word] for word in style.split())
    return f"\x1b[{codes}m{text}\x1b[0m"
