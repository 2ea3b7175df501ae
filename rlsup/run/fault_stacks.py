"""A fatal signal in native code (a user's C++ env, say) leaves the Python stack of every thread in worker.log."""
from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path

from rlsup import own_files
from rlsup.formatting import Sentence

# Where the worker records stacks, for the processes it starts (env processes, V-trace actors) to record too.
ENVIRONMENT_KEY = "RLSUP_FAULT_LOG"
STACK_NOTE = "the Python stack at the fault is in worker.log"
# The signals faulthandler dumps a stack for: a crash inside the process, never a stop somebody sent.
FAULT_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL})

# faulthandler writes to the descriptor, so each file it was given must stay open for the process's life.
_open_logs: list = []


def record_to(log_path: Path) -> None:
    """From now on a fatal signal in this process, or in one it starts after this, dumps stacks into log_path."""
    os.environ[ENVIRONMENT_KEY] = str(log_path)
    _enable(str(log_path))


def record_where_the_worker_does() -> None:
    """In an env process or an actor: dump stacks where the worker that started it does, if it does."""
    log_path = os.environ.get(ENVIRONMENT_KEY)
    if log_path:
        _enable(log_path)


def _enable(log_path: str) -> None:
    try:
        log_file = own_files.append_text(Path(log_path))  # never closed: see _open_logs
    except OSError:
        return  # a fault still ends the process, only without its stack: nothing to refuse a run for
    _open_logs.append(log_file)
    faulthandler.enable(log_file, all_threads=True)


class ChildFault(Sentence, RuntimeError):
    """An env process or V-trace actor killed by a fault signal: its message is the run's whole sentence, since
    no traceback of this process says more than the stack faulthandler wrote."""


def child_ended(who: str, exit_code: int | None, when: str) -> RuntimeError:
    """The error for a child that ended while it was needed: a ChildFault when a fault signal killed it."""
    note = stack_note(-exit_code if exit_code is not None and exit_code < 0 else None)
    sentence = f"{who} {ended_by(exit_code)} {when}{note}"
    return ChildFault(sentence) if note else RuntimeError(sentence)


def ended_by(exit_code: int | None) -> str:
    """How a child process ended, from its exit code (negative: the signal that killed it)."""
    if exit_code is None or exit_code >= 0:
        return f"exited with code {exit_code}"
    return f"was killed by signal {-exit_code} ({signal_name(-exit_code)})"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def stack_note(signal_number: int | None) -> str:
    """'; <where the stack is>' after a process killed by a fault signal faulthandler dumps for, else nothing."""
    return f"; {STACK_NOTE}" if signal_number in FAULT_SIGNALS else ""
