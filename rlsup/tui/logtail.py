"""The worker.log pane, and the log panes' base: wrapped to the pane's width whenever it changes."""
from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.widgets import RichLog

from rlsup.formatting import printable

# Lines kept in the pane: the poller's tail is shorter, so a reader scrolled up keeps some history.
KEPT_LINES = 2_000
# RichLog wraps at 78 columns at least, and a narrower pane would crop the rest.
MINIMUM_WIDTH = 20


class WrappedLog(RichLog):
    """A RichLog whose lines are wrapped at the pane's width, rewrapped when it changes.

    RichLog renders a line once, at the width the pane has when it is written. A pane hidden behind the
    experiment pane has no width, so what arrived then was wrapped at MINIMUM_WIDTH and stayed so in a
    46-column pane (issue 50 item 7): what comes while the pane has no width is held, and written at its
    next size. Subclasses keep what they show in `shown`, oldest first, and say how an item is drawn (draw):
    only the items not yet written are drawn, except after a change of width, which redraws them all."""

    def __init__(self, **options):
        super().__init__(wrap=True, markup=False, min_width=MINIMUM_WIDTH, **options)
        self.written_width = 0  # the width the written lines were wrapped at; 0 while none was written
        self.unwritten = 0      # the newest items held but not written yet
        self.following = True   # at the end when the last items came: kept there
        self.shown: list = []   # every item the pane holds, oldest first

    def draw(self, item) -> RenderableType:
        """One item as the pane shows it."""
        raise NotImplementedError

    def start_over(self) -> None:
        self.clear()
        self.unwritten = 0

    def added(self, count: int, scroll_end: bool | None = None) -> None:
        """The newest count items were just added: written now, or when the pane has a width."""
        self.unwritten += count
        self.catch_up(scroll_end)

    def catch_up(self, scroll_end: bool | None = None) -> None:
        width = self.scrollable_content_region.width
        if not width:
            return  # hidden, or not laid out yet
        if width != self.written_width:
            self.clear()
            self.written_width, self.unwritten = width, len(self.shown)
        for item in self.shown[len(self.shown) - min(self.unwritten, len(self.shown)):]:
            self.write(self.draw(item), scroll_end=scroll_end)
        self.unwritten = 0

    def on_resize(self) -> None:
        self.catch_up()
        if self.following:  # a new wrap or height moves the end: it is known once laid out
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)


def new_lines(shown: list[str], tail: tuple[str, ...]) -> tuple[str, ...] | None:
    """The lines of tail after what is already shown, or None when they do not continue it.

    The poller sends the file's last lines each time it grows; the longest end of what is shown
    that starts the tail marks where the new lines begin. No overlap means a new file, a selection
    of another job, or more new lines than the tail holds: the pane then starts over.
    """
    for overlap in range(min(len(shown), len(tail)), 0, -1):
        if shown[-overlap:] == list(tail[:overlap]):
            return tail[overlap:]
    return None if shown else tail


class LogTail(WrappedLog):
    """The last lines of the selected job's worker.log, each wrapped to the pane's width: a Log cut them at
    its edge, about 60 characters into a line, with nothing to say more was there."""

    def __init__(self, **options):
        super().__init__(max_lines=KEPT_LINES, highlight=False, **options)
        self.shown: list[str] = []  # the file's lines in the pane, unwrapped

    def draw(self, line: str) -> Text:
        return Text(line)  # Text: a log line is never read as markup

    def show(self, lines: tuple[str, ...]) -> None:
        # Appending keeps the reader's place; the pane scrolls along only when it was at the end.
        following = self.following = self.is_vertical_scroll_end
        lines = tuple(printable(line) for line in lines)  # a run's log is its data: shown, never acted on
        appended = new_lines(self.shown, lines)
        if appended is None:
            self.start_over()
            self.shown, appended = [], lines
        self.shown = (self.shown + list(appended))[-KEPT_LINES:]
        self.added(len(appended), scroll_end=following)
        if following:
            # Before the first layout the end is not known yet: scroll again once it is.
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
