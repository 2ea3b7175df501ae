"""What a stop signal raises in an rlsup command, and the one sentence rlsup says when it ends one."""
from __future__ import annotations

import signal

# Said last, by main(), with 128 + the number as the exit code (a shell's convention: 130, 143).
SAID = {signal.SIGINT: "rlsup: interrupted", signal.SIGTERM: "rlsup: terminated"}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that every cleanup that answers one (a
    half-written export removed, the terminal's cursor given back) answers both."""


def raise_stop(number: int) -> None:
    """Raise what the stop signal `number` raises: Terminated for SIGTERM, KeyboardInterrupt for Ctrl-C."""
    raise Terminated if number == signal.SIGTERM else KeyboardInterrupt


def signal_number(stop: KeyboardInterrupt) -> int:
    return signal.SIGTERM if isinstance(stop, Terminated) else signal.SIGINT
