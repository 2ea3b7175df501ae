"""What an experiment's scheduler decided, as lines: each rung's members, their metric, and the verdict."""
from __future__ import annotations

import re

from rlsup import formatting
from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.ranking import Report, figure, ranked
from rlsup.jobs.record import Job
from rlsup.jobs import standings
from rlsup.jobs.standings import Decision, metric_value
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
    """The scheduler's heading, then per rung its members (reported first, best first) and their verdicts."""
    if not isinstance(settings, AshaSettings):
        return [f"PBT on {settings.metric}, every {settings.interval:,} steps"]
    rungs = ", ".join(f"{rung:,}" for rung in settings.rungs)
    lines = [f"ASHA on {settings.metric}: rungs at {rungs} steps, the top {settings.keep:g} promoted at each"]
    verdict_at = {(decision.job_id, decision.step): decision.verdict for decision in decided}
    names = {job.id: formatting.printable(job.name) for job in members}
    width = max((len(name) for name in names.values()), default=0)
    for number, step in enumerate(settings.rungs, 1):
        measured = {job_id: standing for job_id, standings in held.items() for standing in standings
                    if standing.step == step}
        if not measured:
            continue
        lines.append(f"  rung {number} at {step:,}: {len(measured)} reported")
        reports = [Report(job_id, step, metric_value(standing.values.get(settings.metric)))
                   for job_id, standing in measured.items()]
        for report in ranked(reports):  # the order the decisions rank by
            verdict = verdict_at.get((report.member, step), "waiting")
            lines.append(f"    {report.member:>4}  {names.get(report.member, '?').ljust(width)}  "
                         f"{settings.metric} {figure(report.value):>8}  {verdict}")
    return lines


def held_mark(reason: str) -> str | None:
    """A paused member's place in its experiment's scheduler, for the jobs table: "stopped at rung 2" (ASHA's
    reason, decisions/asha.py) or "waiting at rung 1" (its worker's, daemon/deciding.py's hold label); else None."""
    stopped = re.match(r"stopped by ASHA at rung (\d+)", reason)
    if stopped:
        return f"stopped at rung {stopped[1]}"
    waiting = re.match(r"reached rung (\d+) of ASHA", reason)
    return f"waiting at rung {waiting[1]}" if waiting else None
