"""Whether the rlsup command line is this process's program, and the signal rules that only a program may set."""
from __future__ import annotations

import os
import signal
import sys
import threading

# `rlsup` (the console script), or `python -m rlsup.cli`, while which Python sets argv[0] to "-m"; never a
# test or tool that imports the package, whose signals are its own.
AS_PROGRAM = os.path.basename(sys.argv[0] if sys.argv else "") == "rlsup" or sys.argv[:1] == ["-m"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be, so that every cleanup that answers one (a
    half-written export removed, the terminal's cursor given back) answers both."""


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated


def answer_stop_signals() -> None:
    """Ctrl-C raises KeyboardInterrupt and SIGTERM Terminated, even in a command started ignoring them (a
    script's background job), instead of ending it without a word; only the main thread may install them."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _raise_terminated)


def finished() -> None:
    """The command's result stands: a stop signal from here on (while it prints its last lines, or while the
    interpreter tears torch down) would only turn a success into a failure, so it is ignored. Ignored, not
    held: a signal goes to any thread that does not block it, and torch's threads would take it for main's."""
    if AS_PROGRAM and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
