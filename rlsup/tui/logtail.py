"""The worker.log pane: follows the file's end as tail -f does, unless the reader has scrolled up."""
from __future__ import annotations

from textual.widgets import Log

from rlsup.formatting import printable

# Lines kept in the pane: the poller's tail is shorter, so a reader scrolled up keeps some history.
KEPT_LINES = 2_000


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


class LogTail(Log):
    """The last lines of the selected job's worker.log."""

    def __init__(self, **options):
        super().__init__(max_lines=KEPT_LINES, **options)

    def show(self, lines: tuple[str, ...]) -> None:
        # Appending keeps the reader's place; Log scrolls along only when it was at the end.
        following = self.is_vertical_scroll_end
        lines = tuple(printable(line) for line in lines)  # a run's log is its data: shown, never acted on
        appended = new_lines(list(self.lines), lines)
        if appended is None:
            self.clear()
            appended = lines
        self.write_lines(appended, scroll_end=following)
        if following:
            # Before the first layout the end is not known yet: scroll again once it is.
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
