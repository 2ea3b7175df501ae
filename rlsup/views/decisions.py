"""What an experiment's scheduler decided, as lines: each rung's members, their metric, and the verdict."""
from __future__ import annotations

import re

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


def read_scheduler_lines(store: Store, experiment: str, members: list[Job]) -> list[str]:
    """scheduler_lines from the store; none for an experiment without a [scheduler]."""
    settings = standings.scheduler(store, experiment)
    if settings is None:
        return []
    ids = [job.id for job in members]
    return scheduler_lines(settings, members, standings.standings(store, ids), standings.decisions(store, ids))


def scheduler_lines(settings: Settings, members: list[Job], held: dict[int, list[Standing]],
                    decided: list[Decision]) -> list[str]:
    """The scheduler's heading, then per comparison (an ASHA rung, a PBT generation) its members, best first,
    with their metric and verdict ("waiting" before it)."""
    if isinstance(settings, AshaSettings):
        rungs = ", ".join(f"{rung:,}" for rung in settings.rungs)
        lines = [f"ASHA on {settings.metric}: rungs at {rungs} steps, the top {settings.keep:g} promoted at each"]
        comparisons = [(f"rung {number}", step) for number, step in enumerate(settings.rungs, 1)]
    else:
        perturbed = ", ".join(settings.perturb)
        lines = [f"PBT on {settings.metric}, every {settings.interval:,} steps: the bottom {settings.quantile:g} "
                 f"forks the top, perturbing {perturbed}"]
        steps = sorted({standing.step for standings_of in held.values() for standing in standings_of})
        comparisons = [(f"generation {step // settings.interval}", step) for step in steps]
    verdict_at = {(decision.job_id, decision.step): decision.verdict for decision in decided}
    names = {job.id: formatting.printable(job.name) for job in members}
    width = max((len(name) for name in names.values()), default=0)
    for label, step in comparisons:
        measured = {job_id: standing for job_id, standings_of in held.items() for standing in standings_of
                    if standing.step == step}
        if not measured:
            continue
        lines.append(f"  {label} at {step:,}: {len(measured)} reported")
        reports = [Report(job_id, step, metric_value(standing.values.get(settings.metric)))
                   for job_id, standing in measured.items()]
        for report in ranked(reports):  # the order the decisions rank by
            verdict = verdict_at.get((report.member, step), "waiting")
            lines.append(f"    {report.member:>4}  {names.get(report.member, '?').ljust(width)}  "
                         f"{settings.metric} {figure(report.value):>8}  {verdict}")
    return lines


def held_mark(reason: str) -> str | None:
    """A paused member's place in its experiment's scheduler, for the jobs table: "stopped at rung 2" (ASHA's
    reason, decisions/asha.py), "replaced at generation 1" (daemon/pbt_generations.py's), "waiting at rung 1" or
    "waiting at generation 3" (its worker's, from the hold's label); else None."""
    decided = re.match(r"(?:stopped by ASHA at (rung \d+))|(?:replaced at (generation \d+))", reason)
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
