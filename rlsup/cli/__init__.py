"""The rlsup command line: `parser` builds the commands, each module of this package runs some of them."""
from __future__ import annotations

from rlsup.cli.program import AS_PROGRAM
from rlsup.run.signals import hold_signals

# First, before the imports below: Ctrl-C (and SIGTERM, SIGHUP) wait, pending, until the command is ready
# for them: main() releases them once its handler is in, or, for `rlsup run`, the worker once it listens
# (run/signals.py says why). Only when this is the program, never when a test or tool imports it.
if AS_PROGRAM:
    hold_signals()

from rlsup.cli.parser import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]
