"""Whether the rlsup command line is this process's program, and the signal rules that only a program may set."""
from __future__ import annotations

import importlib
import os
import signal
import sys
import threading

from rlsup.stopping import SAID, Terminated, raise_stop

# `rlsup` (the console script), or `python -m rlsup.cli`, while which Python sets argv[0] to "-m"; never a
# test or tool that imports the package, whose signals are its own.
AS_PROGRAM = os.path.basename(sys.argv[0] if sys.argv else "") == "rlsup" or sys.argv[:1] == ["-m"]
# What an env check imports (gymnasium, ale_py, a user's env packages come later): see import_quietly.
ENV_CHECK_IMPORTS = "rlsup.algos.envs.sources"
_noted: list[int] = []  # the stop signal that came while a command started (note_stops), if any


def _raise_terminated(signum: int, frame) -> None:
    raise Terminated


def answer_stop_signals() -> None:
    """Ctrl-C raises KeyboardInterrupt, even in a command started ignoring it (a script's background job), and
    in the program SIGTERM raises Terminated instead of ending it without a word (a test that calls main()
    keeps its own SIGTERM). Only the main thread may install them."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if AS_PROGRAM:
            signal.signal(signal.SIGTERM, _raise_terminated)


def note_stops() -> None:
    """Until answer_stops(): a first Ctrl-C or SIGTERM is noted, not raised, and a second leaves at once.

    For a command's start-up: torch's, gymnasium's and ale_py's imports, a checkpoint's load, an env's
    making. A KeyboardInterrupt raised in there can break the interpreter: over some 280 Ctrl-Cs at random
    moments of `rlsup enjoy`'s start, one SIGSEGV, one SIGABRT, one RuntimeError traceback out of a
    dataclass's __set_name__, and one swallowed, so that enjoy played on for 20 minutes (none in 200 since).
    """
    if AS_PROGRAM and threading.current_thread() is threading.main_thread():
        _noted.clear()
        for number in SAID:
            signal.signal(number, _note)


def _note(signum: int, frame) -> None:
    if _noted:  # the second: the user wants out of a start-up that takes too long
        os.write(2, f"{SAID[signum]}\n".encode())
        os._exit(128 + signum)
    _noted.append(signum)


def answer_stops() -> None:
    """The start-up is done: stop signals raise again (answer_stop_signals), and one noted meanwhile now."""
    answer_stop_signals()
    if _noted:
        raise_stop(_noted.pop())


def import_quietly(module: str) -> None:
    """Import a command's heavy module (gymnasium and ale_py, for an env check) with stops noted, then answer
    them: one that came meanwhile is raised once the import is whole."""
    note_stops()
    try:
        importlib.import_module(module)
    finally:
        answer_stop_signals()
    answer_stops()


def finished() -> None:
    """The command's result stands: a stop signal from here on (while it prints its last lines, or while the
    interpreter tears torch down) would only turn a success into a failure, so it is ignored. Ignored, not
    held: a signal goes to any thread that does not block it, and torch's threads would take it for main's."""
    if AS_PROGRAM and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def leave(code: int) -> int:
    """The program ends here, without torch's teardown where a command loaded it (run/exit.py's end_process);
    a test or tool that called main() gets the code back."""
    if AS_PROGRAM and threading.current_thread() is threading.main_thread():
        from rlsup.run.exit import end_process  # here: this module is imported before the signals are held

        return end_process(code)
    return code
