"""status.json as a reader takes it: what a worker last wrote, each value checked (DESIGN.md section 6)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from rlsup.run import files as runfiles


def number(value: object) -> float | None:
    """A finite int or float as a float; None for anything else (bools, strings, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def whole(value: object) -> int | None:
    found = number(value)
    return int(found) if found is not None else None


@dataclass(frozen=True)
class WorkerStatus:
    """What a worker last wrote to status.json (DESIGN.md section 6), each value checked; None where absent."""

    pid: int | None
    phase: str | None
    time: float | None
    step: int | None
    total_steps: int | None
    steps_per_second: float | None
    mean_return: float | None
    notice: str | None
    switched_off: tuple[str, ...] = ()  # each requested feature the worker had to switch off, in a sentence


def parse_status(raw: dict | None) -> WorkerStatus | None:
    """The checked values of a status.json object; None for a missing or half-written file."""
    if raw is None:
        return None
    notice, phase, switched_off = raw.get("notice"), raw.get("phase"), raw.get("switched_off")
    return WorkerStatus(pid=whole(raw.get("pid")), phase=phase if isinstance(phase, str) else None,
                        time=number(raw.get("time")), step=whole(raw.get("step")),
                        total_steps=whole(raw.get("total_steps")), steps_per_second=number(raw.get("steps_per_second")),
                        mean_return=number(raw.get("mean_return")), notice=str(notice) if notice else None,
                        switched_off=tuple(str(sentence) for sentence in switched_off or () if sentence)
                        if isinstance(switched_off, list) else ())


def read_worker_status(run_dir: str | Path) -> WorkerStatus | None:
    return parse_status(runfiles.read_status(Path(run_dir)))
