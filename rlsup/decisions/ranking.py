"""Members' metric reports and the one order every decision ranks them by."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable


@dataclass(frozen=True)
class Report:
    """A member's metric at a step where the experiment compares members (a rung, a PBT interval)."""

    member: int     # the member's job id
    step: int
    value: float    # higher is better; NaN (a member that never evaluated, or diverged) ranks last


def ranked(reports: Iterable[Report]) -> list[Report]:
    """Best first: by value, NaN last, ties to the lower member id, so the order never depends on arrival."""
    return sorted(reports, key=lambda report: (math.isnan(report.value),
                                               -report.value if not math.isnan(report.value) else 0.0,
                                               report.member))


def kept_count(reported: int, keep: float) -> int:
    """How many of `reported` members the top `keep` fraction holds (rounded down, a float's 1/3 included)."""
    return math.floor(reported * keep + 1e-9)


def figure(value: float) -> str:
    """A metric as a decision's reason writes it: "143", "12.5", "nan"."""
    if math.isnan(value):
        return "nan"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
