"""What an experiment's scheduler decided: each rung's or generation's members, their metric and verdict, its outcome."""
from __future__ import annotations

import re
from dataclasses import dataclass

from rlsup import formatting
from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.ranking import Report, figure, ranked
from rlsup.jobs.record import Job
from rlsup.jobs import standings
from rlsup.jobs.standings import Decision, metric_value
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.run.holds import Standing
from rlsup.spec.scheduler_table import Settings
from rlsup.views.outcome import (STOPPED_REASON, ForkMark, Outcome, fork_marks, lineage_lines, lineage_roots,
                                  outcome)


@dataclass(frozen=True)
class Placed:
    """A member's place in one comparison: its metric there and the scheduler's verdict ("waiting" before it)."""

    member: int
    name: str
    value: float
    verdict: str


@dataclass(frozen=True)
class Comparison:
    """An ASHA rung or a PBT generation: the members that reported there, best first."""

    label: str   # "rung 1", "generation 2"
    step: int
    placed: tuple[Placed, ...]

    @property
    def title(self) -> str:
        return f"{self.label} at {self.step:,}: {len(self.placed)} reported"


@dataclass(frozen=True)
class SchedulerView:
    """What an experiment's scheduler said and came to, for `rlsup status`, the TUI and `rlsup plot` alike."""

    heading: str
    metric: str
    comparisons: tuple[Comparison, ...]
    outcome: Outcome
    forks: tuple[ForkMark, ...] = ()
    lineage: tuple[str, ...] = ()   # a line per fork (outcome.lineage_lines)
    replaced: frozenset[int] = frozenset()   # PBT members whose place a fork took

    @property
    def roots(self) -> dict[int, int]:
        return lineage_roots(self.forks)


def read_scheduler_view(store: Store, experiment: str, members: list[Job]) -> SchedulerView | None:
    """scheduler_view from the store; None for an experiment without a [scheduler]."""
    settings = standings.scheduler(store, experiment)
    if settings is None:
        return None
    ids = [job.id for job in members]
    return scheduler_view(settings, members, standings.standings(store, ids), standings.decisions(store, ids))


def scheduler_view(settings: Settings, members: list[Job], held: dict[int, list[Standing]],
                   decided: list[Decision]) -> SchedulerView:
    """The scheduler's heading, its comparisons (an ASHA rung, a PBT generation) with their members ranked as the
    decisions rank them, its outcome and, for PBT, its forks."""
    names = {job.id: job.name for job in members}
    if isinstance(settings, AshaSettings):
        rungs = ", ".join(f"{rung:,}" for rung in settings.rungs)
        heading = f"ASHA on {settings.metric}: rungs at {rungs} steps, the top {settings.keep:g} promoted at each"
        steps = [(f"rung {number}", step) for number, step in enumerate(settings.rungs, 1)]
        forks: tuple[ForkMark, ...] = ()
        lineage: list[str] = []
    else:
        perturbed = ", ".join(settings.perturb)
        heading = (f"PBT on {settings.metric}, every {settings.interval:,} steps: the bottom {settings.quantile:g} "
                   f"forks the top, perturbing {perturbed}")
        reported = sorted({standing.step for standings_of in held.values() for standing in standings_of})
        steps = [(f"generation {step // settings.interval}", step) for step in reported]
        forks = fork_marks(decided)
        lineage = lineage_lines(forks, names, settings.interval)
    verdict_at = {(decision.job_id, decision.step): decision.verdict for decision in decided}
    comparisons = []
    for label, step in steps:
        reports = [Report(job_id, step, metric_value(standing.values.get(settings.metric)))
                   for job_id, standings_of in held.items() for standing in standings_of if standing.step == step]
        if reports:
            comparisons.append(Comparison(label, step, tuple(
                Placed(report.member, names.get(report.member, "?"), report.value,
                       verdict_at.get((report.member, step), "waiting"))
                for report in ranked(reports))))  # the order the decisions rank by
    replaced = frozenset(decision.job_id for decision in decided if decision.verdict == standings.REPLACED)
    return SchedulerView(heading, settings.metric, tuple(comparisons), outcome(settings, members, held, decided),
                         forks, tuple(lineage), replaced)


def scheduler_lines(view: SchedulerView) -> list[str]:
    """The view as `rlsup status EXPERIMENT` prints it under its outcome: the heading, each comparison's members
    with their metric and verdict, and the lineage of forks."""
    width = max((len(formatting.printable(placed.name)) for comparison in view.comparisons
                 for placed in comparison.placed), default=0)
    lines = [view.heading]
    for comparison in view.comparisons:
        lines.append(f"  {comparison.title}")
        lines += [f"    {placed.member:>4}  {formatting.printable(placed.name).ljust(width)}  "
                  f"{view.metric} {figure(placed.value):>8}  {placed.verdict}" for placed in comparison.placed]
    if view.lineage:
        lines += ["lineage:", *(f"  {line}" for line in view.lineage)]
    return lines


def held_mark(reason: str) -> str | None:
    """A paused member's place in its experiment's scheduler, for the jobs table: "stopped at rung 2" (ASHA's
    reason, decisions/asha.py), "replaced at generation 1" (daemon/pbt_generations.py's), "waiting at rung 1" or
    "waiting at generation 3" (its worker's, from the hold's label); else None."""
    decided = STOPPED_REASON.match(reason)
    if decided:
        return f"stopped at {decided[1]}" if decided[1] else f"replaced at {decided[2]}"
    waiting = re.match(r"reached (rung \d+ of ASHA|generation \d+ of PBT)", reason)
    return f"waiting at {waiting[1].rsplit(' of ', 1)[0]}" if waiting else None


def held_refusal(job: Job) -> str | None:
    """Why resuming a member that waits at its hold for its experiment's decision does nothing, in one sentence:
    it would train no step and pause there again. None for any other job."""
    mark = held_mark(job.reason) if job.state is State.PAUSED else None
    if mark is None or not mark.startswith("waiting at"):
        return None
    return (f"job {job.id} is {mark} for its experiment's decision, which comes once the members still training "
            f"have reached that step too, and then goes on by itself if promoted (rlsup status {job.experiment} "
            "shows who has reported; a member paused by hand holds the decision up until resumed or killed)")
