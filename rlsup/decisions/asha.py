"""Asynchronous successive halving (Li et al. 2018) that promotes what synchronous halving would, early when it can.

A member trains to a rung's step and pauses there with a checkpoint. Successive halving promotes (resumes to
the next rung, or to its budget after the last) the top `keep` fraction of the members that complete a
rung, at least one. A rung's population is every member that can still reach it: those that reported there,
and the live ones not yet there that no lower rung has stopped (a lower rung promotes at most its own quota).
A member is promoted as soon as no reports still to come can push it out of the top quota, however many of
them come (a member killed on its way neither reports nor counts); promotions are never taken back. Once
every member that can reach a rung has reported there (or is gone: killed, failed, ended), the rung is
complete: the rest stay paused, stopped with the reason. So whatever order members arrive in, on any number
of slots, the promotions are synchronous successive halving's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Sequence

from rlsup.decisions.ranking import Report, figure, kept_count, ranked


@dataclass(frozen=True)
class AshaSettings:
    rungs: tuple[int, ...]   # ascending steps at which members are compared
    keep: float              # the fraction promoted at each rung (1/eta), 0 < keep < 1
    metric: str = "eval_return"


@dataclass(frozen=True)
class Verdict:
    """One decision: `member` at rung number `rung` (0 for the first) is promoted, or stopped."""

    member: int
    rung: int
    promoted: bool
    reason: str


@dataclass(frozen=True)
class Rung:
    """Who stands at one rung now: the reports there, best first, and how many members may yet join them."""

    number: int
    order: list[Report]
    coming: int   # members that can still report here, at most

    @property
    def complete(self) -> bool:
        return self.coming == 0


def decide(settings: AshaSettings, members: Sequence[int], reports: Iterable[Report],
           decided: Mapping[tuple[int, int], bool], gone: Collection[int] = ()) -> list[Verdict]:
    """The verdicts not yet in `decided` ((member, rung) -> promoted) that the reports now call for.

    Pure: the same members, reports and earlier verdicts give the same new verdicts, in the same order,
    whatever order the reports came in; a daemon that died mid-decision derives the same ones again."""
    decided = dict(decided)
    at_rung = reports_by_rung(settings, reports)
    verdicts: list[Verdict] = []
    arriving = len(members)  # at most this many members report at the rung: every member at the first
    for number in range(len(settings.rungs)):
        rung = standing_at(number, members, at_rung.get(number, {}), decided, set(gone), arriving)
        for verdict in rung_verdicts(settings, rung, decided):
            decided[(verdict.member, number)] = verdict.promoted
            verdicts.append(verdict)
        promoted = sum(1 for member in members if decided.get((member, number)))
        arriving = max(promoted, quota(len(rung.order) + rung.coming, settings.keep))
    return verdicts


def reports_by_rung(settings: AshaSettings, reports: Iterable[Report]) -> dict[int, dict[int, Report]]:
    """Rung number -> member -> its report there (the first one, should a member report a rung twice)."""
    rung_of = {step: number for number, step in enumerate(settings.rungs)}
    by_rung: dict[int, dict[int, Report]] = {}
    for report in reports:
        if report.step in rung_of:
            by_rung.setdefault(rung_of[report.step], {}).setdefault(report.member, report)
    return by_rung


def standing_at(number: int, members: Sequence[int], reported: Mapping[int, Report],
                decided: Mapping[tuple[int, int], bool], gone: set[int], arriving: int) -> Rung:
    """Rung `number` now. Its reports count from members promoted into it (a stopped member resumed by hand
    reports no more rungs); members that may still report are the live ones not there yet that no lower rung
    stopped, though never more than the lower rung can still promote (`arriving`, those there included)."""
    entered = [member for member in members if number == 0 or decided.get((member, number - 1))]
    order = ranked(reported[member] for member in entered if member in reported)
    may_come = sum(1 for member in members if member not in reported and member not in gone
                   and not any(decided.get((member, lower)) is False for lower in range(number)))
    return Rung(number, order, max(0, min(may_come, arriving - len(order))))


def quota(population: int, keep: float) -> int:
    """How many of a complete rung of `population` members go on: the top `keep`, and always its best."""
    return max(kept_count(population, keep), 1) if population else 0


def safe(position: int, rung: Rung, keep: float) -> bool:
    """Whether the member at `position` (from 1) stays in the top quota whatever comes: any number of the
    members still to come may report (the rest killed first), each of them ranking above it."""
    reported = len(rung.order)
    return all(position + more <= quota(reported + more, keep) for more in range(rung.coming + 1))


def rung_verdicts(settings: AshaSettings, rung: Rung, decided: Mapping[tuple[int, int], bool]) -> list[Verdict]:
    verdicts = []
    for position, report in enumerate(rung.order, 1):
        if (report.member, rung.number) in decided:
            continue
        promoted = safe(position, rung, settings.keep)
        if promoted or rung.complete:
            verdicts.append(Verdict(report.member, rung.number, promoted, reason(settings, rung, position, promoted)))
    return verdicts


def reason(settings: AshaSettings, rung: Rung, position: int, promoted: bool) -> str:
    """Why: "stopped by ASHA at rung 2: eval_return 143 ranks 7 of 9 (kept: top 3)"; a promotion taken before
    the rung is complete says so: "... ranks 1 of 7 (kept: top 3 of at most 9; the 2 still to come cannot
    push it out)"."""
    reported, eventual = len(rung.order), len(rung.order) + rung.coming
    kept = f"kept: top {quota(reported, settings.keep)}"
    if not rung.complete:
        kept = (f"kept: top {quota(eventual, settings.keep)} of at most {eventual}; "
                f"the {rung.coming} still to come cannot push it out")
    return (f"{'promoted' if promoted else 'stopped'} by ASHA at rung {rung.number + 1}: {settings.metric} "
            f"{figure(rung.order[position - 1].value)} ranks {position} of {reported} ({kept})")
