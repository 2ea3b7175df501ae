"""The rlsup command line: `parser` builds the commands, each module of this package runs some of them."""
from __future__ import annotations

import os
import signal
import sys


def leave_on_early_interrupt(signum: int, frame) -> None:
    """Ctrl-C while Python is still importing rlsup: nothing has been written yet, so leave at once."""
    os.write(2, b"rlsup: interrupted\n")
    os._exit(128 + signal.SIGINT)


# Before the imports below (a tenth of a second): a Ctrl-C during them would print a traceback. Only
# when this is the program, never when a test or tool imports it: `rlsup` (the console script), or
# `python -m rlsup.cli`, while which Python sets argv[0] to "-m" as it imports this package.
if os.path.basename(sys.argv[0] if sys.argv else "") == "rlsup" or sys.argv[:1] == ["-m"]:
    signal.signal(signal.SIGINT, leave_on_early_interrupt)

from rlsup.cli.parser import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]
