"""hold.json: the step at which an experiment's scheduler (ASHA, PBT) wants a member paused to compare it."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlsup import atomic, paths
from rlsup.formatting import number, whole
from rlsup.own_files import read_json
from rlsup.spec.scheduler_table import METRICS
from rlsup.spec.values import STEPS_MAX


@dataclass(frozen=True)
class Hold:
    """Pause at the first step boundary at or after `step`, with a checkpoint and the metrics measured there.

    Written by the daemon (at submit and with each promotion), read by the worker when it starts: one at the
    step it starts from holds at once (a restart from the pause checkpoint written there), one below is spent.
    The daemon removes the hold of a member it stops, so that a resume by hand trains it on to its end."""

    step: int
    label: str       # what the step is, for the worker's sentence: "rung 2 of ASHA"
    evaluate: bool   # the scheduler compares [eval] means: evaluate there unless an evaluation just ran

    def to_json(self) -> dict:
        return {"step": self.step, "label": self.label, "evaluate": self.evaluate}


@dataclass(frozen=True)
class Standing:
    """What a worker measured where it paused at a hold: the scheduler's metrics there (None: not measured)."""

    step: int                                  # the hold's step (the worker may have paused a little after it)
    values: dict[str, float | None]            # each of STANDING_METRICS

    def to_json(self) -> dict:
        return {"step": self.step, **self.values}

    @classmethod
    def from_json(cls, raw: object) -> "Standing | None":
        """Checked: a standing that does not read is None, and a value that is not a finite number is None."""
        if not isinstance(raw, dict) or whole(raw.get("step")) is None:
            return None
        return cls(whole(raw["step"]), {name: number(raw.get(name)) for name in STANDING_METRICS})


# The metrics a standing holds: the ones a [scheduler] may compare members by.
STANDING_METRICS = tuple(METRICS)


def write_hold(run_dir: Path, hold: Hold) -> None:
    atomic.write_json(Path(run_dir) / paths.HOLD_FILE, hold.to_json())


def read_hold(run_dir: Path) -> Hold | None:
    """The run's hold, checked (a run may come from anyone); None without one or for one that does not read."""
    raw = read_json(Path(run_dir) / paths.HOLD_FILE)
    if raw is None:
        return None
    step, label = whole(raw.get("step")), raw.get("label")
    if step is None or not 0 < step <= STEPS_MAX or not isinstance(label, str):
        return None
    return Hold(step, label[:200], raw.get("evaluate") is True)


def clear_hold(run_dir: Path) -> None:
    (Path(run_dir) / paths.HOLD_FILE).unlink(missing_ok=True)
