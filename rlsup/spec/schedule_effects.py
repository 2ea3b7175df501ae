"""Scheduled fields whose value a schedule overrides from some step on: what a fork or a file sets in vain."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from rlsup import spec as specs

ANNEALED_KINDS = ("elite", "attentive")  # the replays that anneal λ (rlsup/replay/elite.py)


@dataclass(frozen=True)
class Schedule:
    """A field a schedule starts from, and the step from which the schedule's end value holds instead.

    The steps mirror the schedules themselves: LinearSchedule holds its end from end_step on (rlsup/algos/
    schedules.py), elite.annealed_lambda holds 1 from anneal_steps × alpha_annealing_factor on."""

    section: str                                    # "dqn", "vtrace" or "replay" (each [[replay]] table)
    start: str                                      # the field the schedule starts from
    end_step: Callable[[Any], float | None]         # None: no schedule, the start holds throughout
    end_step_name: Callable[[Any], str]             # "lr_end_step = 40,000", as the file says it
    end_value: Callable[[Any], str]                 # "lr_end = 0.0001": what holds from end_step on


SCHEDULES = (
    Schedule("dqn", "lr", lambda s: s.lr_end_step or None, lambda s: f"lr_end_step = {s.lr_end_step:,}",
             lambda s: f"lr_end = {s.lr_end:g}"),
    Schedule("dqn", "epsilon_start", lambda s: s.epsilon_end_step,
             lambda s: f"epsilon_end_step = {s.epsilon_end_step:,}", lambda s: f"epsilon_end = {s.epsilon_end:g}"),
    Schedule("vtrace", "lr", lambda s: s.lr_end_step, lambda s: f"lr_end_step = {s.lr_end_step:,}",
             lambda s: f"lr_end = {s.lr_end:g}"),
    Schedule("replay", "lambda_batch_multiplier",
             lambda r: r.anneal_steps * r.alpha_annealing_factor if r.kind in ANNEALED_KINDS else None,
             lambda r: f"anneal_steps × alpha_annealing_factor = {r.anneal_steps * r.alpha_annealing_factor:,g}",
             lambda r: "lambda = 1"),
)


def _sections(spec: specs.JobSpec, section: str) -> list[tuple[str, Any]]:
    """(field prefix, section value) for a schedule's section: one per [[replay]] table."""
    if section == "replay":
        return [(f"replay[{index}]", replay) for index, replay in enumerate(spec.replay)]
    return [(section, getattr(spec, section))] if spec.job.algo == section else []


def first_use(spec: specs.JobSpec, schedule: Schedule) -> int:
    """The first step that reads the field: DQN's learning rate only from learning_starts, its first update."""
    return spec.dqn.learning_starts if (schedule.section, schedule.start) == ("dqn", "lr") else 0


def unused(spec: specs.JobSpec, file: str, *, step: int = 0, changed: set[str] | None = None) -> list[str]:
    """One line per scheduled field (of changed, when given) that no step from step on reads as set.

    A fork passes its step and the fields it changes: a fork at 60,000 with only lr changed, of a run
    whose lr_end_step is 40,000, trained at lr_end, with the parent's fingerprints and nothing said.
    validate passes step 0: an lr whose schedule ends before DQN's first update is never used."""
    lines = []
    for schedule in SCHEDULES:
        for prefix, section in _sections(spec, schedule.section):
            field, end, used = f"{prefix}.{schedule.start}", schedule.end_step(section), first_use(spec, schedule)
            if (changed is None or field in changed) and end is not None and max(step, used) >= end:
                lines.append(f"{file}: {field} = {getattr(section, schedule.start):g} has no effect"
                             + _why(schedule, section, end, step, used))
    return lines


def _why(schedule: Schedule, section: Any, end: float, step: int, used: int) -> str:
    if used > step:
        relation = "comes before" if end < used else "is the same step as"
        return (f": {schedule.end_step_name(section)} {relation} learning_starts = {used:,}, so every update uses "
                f"{schedule.end_value(section)}")
    return (f" from the fork's step {step:,} on: {schedule.end_step_name(section)} "
            f"{'is past' if end < step else 'is that very step'}, so {schedule.end_value(section)} holds")
