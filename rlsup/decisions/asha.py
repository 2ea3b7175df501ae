"""Asynchronous successive halving (Li et al. 2018): at each rung, promote the top fraction reported so far.

A member trains to a rung's step and pauses there with a checkpoint. It is promoted (resumed to the next
rung, or to its budget after the last) as soon as it ranks in the top `keep` fraction of the members that
have reported at that rung; promotions are never taken back. Once every member that can reach a rung has
reported there (or is gone: killed, failed), the members not promoted stay paused, stopped with the reason.
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


def decide(settings: AshaSettings, members: Sequence[int], reports: Iterable[Report],
           decided: Mapping[tuple[int, int], bool], gone: Collection[int] = ()) -> list[Verdict]:
    """The verdicts not yet in `decided` ((member, rung) -> promoted) that the reports now call for.

    Pure: the same members, reports and earlier verdicts give the same new verdicts, in the same order,
    whatever order the reports came in; a daemon that died mid-decision derives the same ones again."""
    decided = dict(decided)
    at_rung = reports_by_rung(settings, reports)
    verdicts: list[Verdict] = []
    for rung in range(len(settings.rungs)):
        expected = set(members) if rung == 0 else {member for member in members if decided.get((member, rung - 1))}
        for verdict in rung_verdicts(settings, rung, expected, at_rung.get(rung, {}), decided, set(gone)):
            decided[(verdict.member, rung)] = verdict.promoted
            verdicts.append(verdict)
    return verdicts


def reports_by_rung(settings: AshaSettings, reports: Iterable[Report]) -> dict[int, dict[int, Report]]:
    """Rung number -> member -> its report there (the first one, should a member report a rung twice)."""
    rung_of = {step: number for number, step in enumerate(settings.rungs)}
    by_rung: dict[int, dict[int, Report]] = {}
    for report in reports:
        if report.step in rung_of:
            by_rung.setdefault(rung_of[report.step], {}).setdefault(report.member, report)
    return by_rung


def rung_verdicts(settings: AshaSettings, rung: int, expected: set[int], reported: Mapping[int, Report],
                  decided: Mapping[tuple[int, int], bool], gone: set[int]) -> list[Verdict]:
    order = ranked(report for member, report in reported.items() if member in expected)
    complete = all(member in reported or member in gone for member in expected)
    quota = kept_count(len(order), settings.keep)
    if complete and order:
        quota = max(quota, 1)  # a finished rung always sends its best on, however few reached it
    verdicts = []
    for position, report in enumerate(order, 1):
        if (report.member, rung) in decided:
            continue
        standing = (f"{settings.metric} {figure(report.value)} ranks {position} of {len(order)} "
                    f"(kept: top {quota})")
        if position <= quota:
            verdicts.append(Verdict(report.member, rung, True, f"promoted by ASHA at rung {rung + 1}: {standing}"))
        elif complete:
            verdicts.append(Verdict(report.member, rung, False, f"stopped by ASHA at rung {rung + 1}: {standing}"))
    return verdicts
