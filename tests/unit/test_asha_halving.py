"""ASHA against synchronous successive halving: any order of arrivals, any number of slots, the same promotions."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from hypothesis import given, settings, strategies as st

from rlsup.decisions import asha
from rlsup.decisions.ranking import Report, kept_count

RUNGS = (20_000, 60_000, 180_000)
values = st.one_of(st.sampled_from([1.0, 2.0, 3.0]), st.floats(-1e3, 1e3, allow_nan=False), st.just(math.nan))
keeps = st.sampled_from([0.25, 0.34, 0.5, 0.67, 0.9])


def best_first(member: int, value: float) -> tuple:
    """The ranking written out again, independently of rlsup's: NaN last, then by value, then by member."""
    return (math.isnan(value), 0.0 if math.isnan(value) else -value, member)


def top(reported: dict[int, float], keep: float) -> set[int]:
    """Successive halving's survivors of one complete rung: its top `keep`, and always its best."""
    order = sorted(reported, key=lambda member: best_first(member, reported[member]))
    return set(order[:max(1, kept_count(len(order), keep))]) if order else set()


def synchronous(scores: dict[int, list[float]], keep: float) -> set[tuple[int, int]]:
    """(member, rung) promoted by successive halving done in lockstep: every rung complete before the next."""
    alive, promoted = set(scores), set()
    for rung in range(len(RUNGS)):
        alive = top({member: scores[member][rung] for member in alive}, keep)
        promoted |= {(member, rung) for member in alive}
    return promoted


@dataclass
class Experiment:
    """The daemon's part, played by hand: `slots` members train at once, and ASHA decides after each event."""

    settings: asha.AshaSettings
    scores: dict[int, list[float]]
    slots: int
    waiting: list[int] = field(default_factory=list)   # queued, in the queue's order
    running: list[int] = field(default_factory=list)
    reports: list[Report] = field(default_factory=list)
    decided: dict[tuple[int, int], bool] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)

    def rungs_reported(self, member: int) -> int:
        return sum(report.member == member for report in self.reports)

    def finish(self, member: int) -> None:
        """The member reaches its next rung and reports there, or, promoted at the last, ends (done)."""
        self.running.remove(member)
        rung = self.rungs_reported(member)
        if rung == len(RUNGS):
            self.gone.add(member)
        else:
            self.reports.append(Report(member, RUNGS[rung], self.scores[member][rung]))

    def kill(self, member: int) -> None:
        for queue in (self.waiting, self.running):
            if member in queue:
                queue.remove(member)
        self.gone.add(member)

    def decide(self) -> None:
        for verdict in asha.decide(self.settings, list(self.scores), self.reports, self.decided, self.gone):
            key = (verdict.member, verdict.rung)
            assert key not in self.decided, f"member {verdict.member} decided twice at rung {verdict.rung + 1}"
            assert Report(verdict.member, RUNGS[verdict.rung], self.scores[verdict.member][verdict.rung]) \
                in self.reports, "a member decided at a rung it has not reported"
            self.decided[key] = verdict.promoted
            if verdict.promoted and verdict.member not in self.gone:
                self.waiting.append(verdict.member)

    def run(self, data, kills: bool) -> None:
        """Until nothing is queued or running; which running member finishes next (and who is killed) is drawn."""
        while self.waiting or self.running:
            while self.waiting and len(self.running) < self.slots:
                self.running.append(self.waiting.pop(0))
            live = [member for member in self.scores if member not in self.gone]
            if kills and data.draw(st.integers(0, 9), label="kill one now (0)") == 0:
                self.kill(data.draw(st.sampled_from(live), label="killed"))
            else:
                self.finish(data.draw(st.sampled_from(self.running), label="finishes next"))
            self.decide()

    def promoted(self) -> set[tuple[int, int]]:
        return {key for key, promoted in self.decided.items() if promoted}


scores_of = st.integers(1, 12).flatmap(lambda size: st.lists(
    st.lists(values, min_size=len(RUNGS), max_size=len(RUNGS)), min_size=size, max_size=size))


@settings(max_examples=300, deadline=None)
@given(scores_of, keeps, st.integers(1, 4), st.randoms(use_true_random=False), st.data())
def test_any_order_of_arrivals_and_any_slots_promote_as_synchronous_successive_halving(
        rows, keep, slots, shuffler, data) -> None:
    """Issue 50 item 2: a rung after the first counted only the members already promoted into it, so on one
    slot the first member promoted past rung 1 reached every later rung alone and went on ("ranks 1 of 1")."""
    scores = {member: row for member, row in enumerate(rows, 1)}
    experiment = Experiment(asha.AshaSettings(RUNGS, keep), scores, slots, waiting=list(scores))
    shuffler.shuffle(experiment.waiting)
    experiment.run(data, kills=False)
    assert experiment.promoted() == synchronous(scores, keep)
    # Every report decided: nobody is left waiting at a rung once all have reported.
    assert set(experiment.decided) == {(report.member, RUNGS.index(report.step)) for report in experiment.reports}


@settings(max_examples=300, deadline=None)
@given(scores_of, keeps, st.integers(1, 4), st.randoms(use_true_random=False), st.data())
def test_with_members_killed_any_time_each_rung_promotes_the_top_of_those_that_reported_there(
        rows, keep, slots, shuffler, data) -> None:
    """Issue 50 item 2, with kills: a promotion taken early is never one the complete rung would not take, and
    a member killed before its rung neither holds the rung up nor counts in its quota."""
    scores = {member: row for member, row in enumerate(rows, 1)}
    experiment = Experiment(asha.AshaSettings(RUNGS, keep), scores, slots, waiting=list(scores))
    shuffler.shuffle(experiment.waiting)
    experiment.run(data, kills=True)
    for rung, step in enumerate(RUNGS):
        reported = {report.member: report.value for report in experiment.reports if report.step == step}
        assert {member for (member, at), promoted in experiment.decided.items()
                if at == rung and promoted} == top(reported, keep), f"rung {rung + 1}"
        assert {member for member, at in experiment.decided if at == rung} == set(reported)
