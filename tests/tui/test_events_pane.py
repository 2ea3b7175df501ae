"""The events pane: a state change and its reason stay apart however the pane wraps them."""
from __future__ import annotations

import time

import pytest
from textual.app import App, ComposeResult

from rlsup.jobs.store import Event, EventKind
from rlsup.formatting import clock_time
from rlsup.tui.widgets import EventsLog

NOW = time.time()
EVENTS = (Event(1, NOW, 1, EventKind.STATE, "paused", "queued", "running requested"),
          Event(2, NOW, 1, EventKind.STATE, "starting", "running", "worker pid 4242 reports status"),
          Event(3, NOW, 1, EventKind.REFUSED, None, None, "dqn.lr is an identity field: start a new run"))


class EventsOnly(App):
    """Just the events pane, at a width the test chooses."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.pane_width = width

    def compose(self) -> ComposeResult:
        yield EventsLog(id="events")

    def on_mount(self) -> None:
        self.query_one(EventsLog).styles.width = self.pane_width


async def shown_texts(width: int) -> list[str]:
    """What a reader of the pane gets of each event: its lines, each without trailing blanks, run together."""
    app = EventsOnly(width)
    texts = []
    async with app.run_test(size=(100, 20)) as pilot:
        pane = app.query_one(EventsLog)
        for event in EVENTS:
            pane.load(1, (event,))
            await pilot.pause(0.05)
            texts.append("".join(line.text.rstrip() for line in pane.lines))
    return texts


@pytest.mark.parametrize("width", range(22, 64, 2))
async def test_a_wrapped_event_keeps_every_word_apart(width):
    clock = clock_time(NOW)
    shown = [" ".join(text.split()) for text in await shown_texts(width)]
    assert shown == [f"{clock} paused → queued running requested",
                     f"{clock} starting → running worker pid 4242 reports status",
                     f"{clock} refused dqn.lr is an identity field: start a new run"]
