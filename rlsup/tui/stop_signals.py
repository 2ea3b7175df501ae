"""Ctrl-C and SIGTERM close the dashboard as its quit key does: Textual gives the terminal back, then rlsup says why."""
from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Iterator

from textual.app import App

from rlsup.stopping import SAID, raise_stop


class StopRequest:
    """The stop signal the app received, if any; each one asks the app, on its own loop, to exit.

    Raised as an exception instead (KeyboardInterrupt, Terminated), it would land anywhere in Textual's
    loop: measured, a SIGTERM while Textual started left the terminal in its alternate screen. Nor may the
    app exit before its first frame: its screen, half mounted, would fail on widgets already removed.
    """

    def __init__(self, app: App) -> None:
        self.app = app
        self.signal_number: int | None = None
        self.ready = False

    def on_signal(self, signal_number: int, frame) -> None:
        self.signal_number = signal_number
        if self.ready:
            # Safe from a signal handler as from another thread; a loop closed already has exited.
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().call_soon_threadsafe(self.app.exit)

    def app_ready(self) -> None:
        """The app's first frame is shown (Textual's Ready): it can exit now, and does if a signal came."""
        self.ready = True
        if self.signal_number is not None:
            self.app.exit()

    def raise_if_received(self) -> None:
        """Once the app has closed: the exception main() turns into rlsup's one sentence and exit code."""
        if self.signal_number is not None:
            raise_stop(self.signal_number)


@contextlib.contextmanager
def stop_signals_close(app: App) -> Iterator[StopRequest]:
    request = StopRequest(app)
    previous = {number: signal.signal(number, request.on_signal) for number in SAID}
    try:
        yield request
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
