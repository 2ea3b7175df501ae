"""The worker's signal contract: SIGINT/SIGTERM ask for a pause (a second one, or one after a kill request,
aborts), SIGHUP for a reload; until the worker listens, they wait, blocked."""
from __future__ import annotations

import contextlib
import signal

TYPE_CHECKING = False  # not typing's: imported at a program's first line, this module loads only what it must
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Iterator

# The signals Signals answers. A program that will train (`rlsup run`, `python -m rlsup.worker`) blocks them
# from its first line, and the daemon starts its workers with them blocked: one arriving meanwhile waits,
# pending, and install() takes it once the worker listens. Raised as a KeyboardInterrupt instead, it could
# land inside a C extension's import (numpy, ale_py, torch), leave a half-made module to the interpreter's
# exit, or be swallowed by a library's catch-all; by default, SIGTERM and SIGHUP would kill the worker
# outright. Threads started meanwhile (numpy's BLAS pool) inherit the mask, so they never take one either.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})  # a pause; a second one, or after a kill request, aborts
PAUSE_SIGNAL = signal.SIGINT  # the one a runner sends: Ctrl-C's, and the only one Ray's stop can send
RELOAD_SIGNAL = signal.SIGHUP  # re-read job.toml and apply its live fields
LISTENED_SIGNALS = STOP_SIGNALS | {RELOAD_SIGNAL}


def hold_signals() -> None:
    """Keep LISTENED_SIGNALS pending, in this thread and the threads and processes it starts, until released."""
    signal.pthread_sigmask(signal.SIG_BLOCK, LISTENED_SIGNALS)


def release_signals() -> None:
    """Deliver what hold_signals() kept pending, to the handlers installed by now, and every later one."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, LISTENED_SIGNALS)


@contextlib.contextmanager
def starting_held() -> Iterator[None]:
    """Processes started inside the block begin with LISTENED_SIGNALS held (a mask survives fork and exec),
    from before their interpreter's first line: a worker stopped while it starts pauses, once it listens."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, LISTENED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# Said when a second stop comes before the worker listens: the user wants out of a start-up that hangs.
LEFT_WHILE_STARTING = "rlsup: interrupted twice while starting; nothing was trained and the run is as it was\n"
_stopped_while_starting: list[int] = []  # the first stop signal taken by listen_while_starting()'s handler


def listen_while_starting() -> None:
    """Once the imports that an exception could break are done: note a first SIGINT/SIGTERM (install() makes
    it a pause), and leave at once on a second, so a start-up that hangs (a user's env package, a large
    checkpoint) still answers Ctrl-C. The handler never raises, so no library's catch-all can swallow it.
    SIGHUP stays held: a reload means nothing before the worker listens."""
    for number in STOP_SIGNALS:
        signal.signal(number, _on_stop_while_starting)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _on_stop_while_starting(signum: int, frame) -> None:
    if not _stopped_while_starting:
        _stopped_while_starting.append(signum)
        return
    import os  # here: this module loads at a program's first line, and os is loaded by then anyway

    os.write(2, LEFT_WHILE_STARTING.encode())
    os._exit(128 + signum)  # a shell's convention: 130 for SIGINT (EXIT_ABORTED), 143 for SIGTERM


class Aborted(BaseException):
    """A second interrupt: stop at once, without a checkpoint (the previous one stays valid)."""


class Signals:
    """Turns SIGINT/SIGTERM into a pause request (a second one aborts) and SIGHUP into a reload.

    A second interrupt raises Aborted once, and only while abort_raises: the code that records how
    the worker ended (exit.json) must never be cut short, so from then on it is only noted.
    """

    def __init__(self, kill_marker: Path | None = None) -> None:
        # Where a runner that can only send SIGINT (Ray's stop) marks a kill: that stop then aborts.
        self.kill_marker = kill_marker
        self.pause_requested = False
        self.reload_requested = False
        self.abort_requested = False
        self.abort_raises = True

    def install(self) -> None:
        self.pause_requested = bool(_stopped_while_starting)  # one taken while starting is a pause
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_stop)
        signal.signal(RELOAD_SIGNAL, self._on_reload)
        release_signals()  # a signal held since the program's first line is handled here, as a pause

    def _on_stop(self, signum: int, frame) -> None:
        killed = self.kill_marker is not None and self.kill_marker.exists()
        if not self.pause_requested and not killed:
            self.pause_requested = True
            return
        self.abort_requested = self.abort_requested or ("kill request" if killed else
                                                        f"second {signal.Signals(signum).name}")
        if self.abort_raises:
            self.abort_raises = False
            raise Aborted(self.abort_requested)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A second interrupt inside the block is noted and raised as Aborted once the block is done.

        For checkpoint writes: raised inside torch.save's C++ writer callback, it ended the process in
        std::terminate (exit -6 and no exit.json, seen in CI), and a write is over in moments anyway.
        """
        raising, self.abort_raises = self.abort_raises, False
        try:
            yield
        finally:
            self.abort_raises = raising
        if raising and self.abort_requested:
            self.abort_raises = False
            raise Aborted(f"{self.abort_requested} during a checkpoint write, which was finished first")

    def _on_reload(self, signum: int, frame) -> None:
        self.reload_requested = True
