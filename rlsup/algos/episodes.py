"""Finished episodes as a trainer reports them: how many, and the mean unclipped return of recent ones."""
from __future__ import annotations

from collections import deque

RECENT_EPISODES = 100


class EpisodeReturns:
    """The episode count and a window of recent returns, with the checkpoint contract of every part."""

    def __init__(self, window: int = RECENT_EPISODES):
        self.count = 0
        self.recent: deque[float] = deque(maxlen=window)

    def add(self, raw_return: float) -> None:
        self.count += 1
        self.recent.append(float(raw_return))

    def mean(self) -> float | None:
        return sum(self.recent) / len(self.recent) if self.recent else None

    def state_dict(self) -> dict:
        return {"count": self.count, "recent": list(self.recent)}

    def load_state_dict(self, state: dict) -> None:
        self.count = int(state["count"])
        self.recent = deque((float(value) for value in state["recent"]), maxlen=self.recent.maxlen)
