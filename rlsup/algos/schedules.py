"""Schedules written in absolute steps, so extending a budget never bends the past."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LinearSchedule:
    """Goes linearly from start (at start_step) to end (at end_step), then stays at end."""

    start: float
    end: float
    end_step: int
    start_step: int = 0

    def __call__(self, step: int) -> float:
        if step <= self.start_step:
            return self.start
        if step >= self.end_step:
            return self.end
        fraction = (step - self.start_step) / (self.end_step - self.start_step)
        return self.start + fraction * (self.end - self.start)

    @classmethod
    def constant(cls, value: float) -> "LinearSchedule":
        """value at every step."""
        return cls(value, value, end_step=0)


def crossed(previous_step: int, step: int, every: int) -> bool:
    """Whether a multiple of every lies in (previous_step, step]: intervals that survive any step size."""
    return every > 0 and step // every > previous_step // every
