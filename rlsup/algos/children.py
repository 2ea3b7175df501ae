"""What a worker's helpers (actors, a learner) share: a name, death with the worker, no pause signals, its float mode."""
from __future__ import annotations

import contextlib
import ctypes
import signal
import sys
from collections.abc import Iterator

import torch

from rlsup.run.fault_stacks import record_where_the_worker_does
from rlsup.run.float_mode import inherit_flush_denormals
from rlsup.run.signals import STOP_SIGNALS  # a helper ignores a pause's signals: the worker decides

PR_SET_NAME, PR_SET_PDEATHSIG = 15, 1


def spawn_context():
    """spawn, never fork: the worker holds torch's thread pools, which do not survive a fork."""
    return torch.multiprocessing.get_context("spawn")


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Around starting children: they start with SIGINT and SIGTERM blocked (the mask survives fork and exec),
    so a Ctrl-C that reaches the whole process group while they import cannot kill them before they ignore
    it. Blocked, not ignored, here: a pause requested meanwhile is delivered to the worker afterwards."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def become_child(name: str) -> None:
    """A helper's first act: ignore the pause signals (a terminal's Ctrl-C reaches the whole foreground group,
    and the worker would take a helper killed by it for a crash), die with the worker, dump stacks where it does,
    and compute in the worker's float mode ([job] flush_denormals)."""
    inherit_flush_denormals()
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # also drops one that arrived while blocked
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    watch_parent(name)
    record_where_the_worker_does()


def watch_parent(name: str) -> None:
    """Name the process for ps/psutil and, on Linux, have the kernel kill it when the worker dies."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
        # The thread that spawned us is the worker's main thread, so this fires when the process dies,
        # even by SIGKILL, with no chance for it to clean up.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
