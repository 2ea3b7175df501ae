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


# What a helper needs imported before its first line: the fork server imports it once, and each helper forked
# from it starts with it (a spawned helper paid about 2.5 s of CPU for importing torch alone).
HELPER_PRELOAD = ["torch", "rlsup.algos.actor_processes", "rlsup.algos.learner_process"]


def helper_context():
    """multiprocessing's fork server, never a fork of the worker, whose torch thread pools do not survive one:
    a fresh single-threaded process imports HELPER_PRELOAD once and forks each helper. It ends when the
    worker does, and its helpers with it (watch_parent)."""
    context = torch.multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(HELPER_PRELOAD)
    return context


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
        # Our parent is the fork server, single-threaded, which exits when the worker does (even by SIGKILL:
        # its pipe from the worker reads end of file), so this fires then.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
