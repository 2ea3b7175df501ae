"""Where an experiment that decides stands: whether its scheduler has decided everything, its best member, its forks."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

from rlsup import formatting
from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.ranking import Report, figure, ranked
from rlsup.jobs import standings
from rlsup.jobs.record import Job
from rlsup.jobs.standings import Decision, metric_value
from rlsup.jobs.state import State
from rlsup.run.holds import Standing
from rlsup.spec.scheduler_table import Settings

# A fork's decision names whom it forked and whom it replaced, in pbt.replacement's words: "pbt: member 5
# (eval_return 12) forks member 3 (eval_return 200) at step 500 with ...". Its test parses a real one.
FORKED_FROM = re.compile(r"^pbt: member (\d+) .*? forks member (\d+) ")
# A paused member's reason once its scheduler stopped it for good, as standings.record_decision writes ASHA's
# verdict (decisions/asha.py) and PBT's (daemon/pbt_generations.py): "stopped by ASHA at rung 2: ...".
STOPPED_REASON = re.compile(r"(?:stopped by ASHA at (rung \d+))|(?:replaced at (generation \d+))")


def stopped_for_good(job: Job) -> bool:
    """A member its scheduler stopped (ASHA) or replaced by a fork (PBT), still paused where it stopped: it trains
    no further step unless its user resumes it, which makes it a member like any other again."""
    return job.state is State.PAUSED and STOPPED_REASON.match(job.reason) is not None


@dataclass(frozen=True)
class ForkMark:
    """A PBT fork: job `child` was made from `parent`'s checkpoint at `step`, in place of member `replaced`."""

    child: int
    parent: int
    replaced: int
    step: int
    time: float


def fork_marks(decided: Iterable[Decision]) -> tuple[ForkMark, ...]:
    """Every fork the store's decisions record, in the order they were made."""
    marks = []
    for decision in decided:
        found = FORKED_FROM.match(decision.reason) if decision.verdict == standings.FORKED else None
        if found:
            marks.append(ForkMark(decision.job_id, int(found[2]), int(found[1]), decision.step, decision.time))
    return tuple(marks)


def lineage_roots(marks: Iterable[ForkMark]) -> dict[int, int]:
    """Fork -> the member its lineage began with (a fork of a fork goes back to the first parent)."""
    parent = {mark.child: mark.parent for mark in marks}
    roots = {}
    for child in parent:
        root, seen = parent[child], {child}
        while root in parent and root not in seen:  # a cycle cannot be recorded, but a store may come from anyone
            seen.add(root)
            root = parent[root]
        roots[child] = root
    return roots


def lineage_lines(marks: Iterable[ForkMark], names: Mapping[int, str], interval: int) -> list[str]:
    """A line per fork: "job 7 pbt-g1-m5 forked from job 3 pbt-s3 at step 500 (generation 1, 14:02:11),
    replacing job 5"."""
    def named(member: int) -> str:
        return f"job {member} {formatting.printable(names.get(member, '?'))}"
    return [f"{named(mark.child)} forked from {named(mark.parent)} at step {mark.step:,} (generation "
            f"{mark.step // interval}, {formatting.clock_time(mark.time)}), replacing job {mark.replaced}"
            for mark in marks]


@dataclass(frozen=True)
class Best:
    """The member ranked first at the scheduler's latest comparison, with its metric there."""

    member: int
    name: str
    metric: str
    value: float
    where: str   # "rung 2", "generation 3"

    def __str__(self) -> str:
        return f"job {self.member} {formatting.printable(self.name)}, {self.metric} {figure(self.value)} at {self.where}"


@dataclass(frozen=True)
class Outcome:
    """How far an experiment's scheduler has come: members with a decision still ahead, members decided but still to
    train (promoted past the last rung, past the last generation, or resumed by hand), and the best member."""

    scheduler: str      # "ASHA", "PBT"
    undecided: int
    training: int
    best: Best | None

    @property
    def decided(self) -> bool:
        return self.undecided == 0

    @property
    def finished(self) -> bool:
        return self.decided and self.training == 0

    def sentence(self) -> str:
        """"finished: ASHA decided every rung; best job 3 asha-s3, eval_return 348 at rung 2", or how far it is."""
        every = "decided every rung" if self.scheduler == "ASHA" else "took every generation"
        ahead = "a rung" if self.scheduler == "ASHA" else "a generation"
        if not self.decided:
            return f"deciding: {members(self.undecided)} {'has' if self.undecided == 1 else 'have'} {ahead} still ahead"
        best = f"best {self.best}" if self.best else "no member reported"
        if self.finished:
            return f"finished: {self.scheduler} {every}; {best}"
        return (f"{self.scheduler} {every}; {members(self.training)} still to train to {'its' if self.training == 1 else 'their'} "
                f"budget; {best.replace('best', 'best so far', 1)}")


def members(count: int) -> str:
    return f"{count} member{'' if count == 1 else 's'}"


def outcome(settings: Settings, jobs: list[Job], held: Mapping[int, list[Standing]],
            decided: list[Decision]) -> Outcome:
    """The experiment's Outcome from the store's members, standings and decisions: the one definition of
    "finished" that `rlsup status`, the TUI and `rlsup plot` render."""
    ahead = 0
    training = 0
    for job in jobs:
        if job.state in standings.GONE or stopped_for_good(job):
            continue
        own = [decision for decision in decided if decision.job_id == job.id]
        if decision_ahead(settings, job, own):
            ahead += 1
        else:
            training += 1
    return Outcome("ASHA" if isinstance(settings, AshaSettings) else "PBT", ahead, training,
                   best_member(settings, jobs, held))


def decision_ahead(settings: Settings, job: Job, own: list[Decision]) -> bool:
    """Whether the scheduler has still to decide for this live member: ASHA until it is stopped or promoted at the
    last rung; PBT until it has gone on from (or was made at) the last generation before its budget."""
    if any(decision.verdict in (standings.STOPPED, standings.REPLACED) for decision in own):
        return False
    if isinstance(settings, AshaSettings):
        return not any(decision.verdict == standings.PROMOTED and decision.step == settings.rungs[-1]
                       for decision in own)
    last_generation = (job.total_steps - 1) // settings.interval * settings.interval
    reached = max((decision.step for decision in own), default=0)
    return reached < last_generation


def best_member(settings: Settings, jobs: list[Job], held: Mapping[int, list[Standing]]) -> Best | None:
    """The first ranked at the latest step any member reported at (a rung, a generation); None before any."""
    reports = [Report(job_id, standing.step, metric_value(standing.values.get(settings.metric)))
               for job_id, found in held.items() for standing in found]
    if not reports:
        return None
    latest = max(report.step for report in reports)
    top = ranked(report for report in reports if report.step == latest)[0]
    if isinstance(settings, AshaSettings):
        where = f"rung {settings.rungs.index(latest) + 1}" if latest in settings.rungs else f"step {latest:,}"
    else:
        where = f"generation {latest // settings.interval}"
    names = {job.id: job.name for job in jobs}
    return Best(top.member, names.get(top.member, "?"), settings.metric, top.value, where)
