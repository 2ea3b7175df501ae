"""ASHA and PBT as pure functions: reports in, decisions out, the same ones however the reports arrive."""
from __future__ import annotations

import itertools
import math

from hypothesis import given, settings, strategies as st

from rlsup.decisions import asha, pbt
from rlsup.decisions.ranking import Report, kept_count

RUNGS = (20_000, 60_000, 180_000)
ASHA = asha.AshaSettings(rungs=RUNGS, keep=0.34)

values = st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(math.nan), st.sampled_from([1.0, 2.0]))
populations = st.lists(values, min_size=1, max_size=12)


def first_rung(scores: list[float]) -> list[Report]:
    return [Report(member, RUNGS[0], value) for member, value in enumerate(scores, 1)]


def run_asha(members, reports, gone=()) -> dict[tuple[int, int], asha.Verdict]:
    """Reports arriving one at a time, as members reach their rungs, with decisions taken after each."""
    decided: dict[tuple[int, int], bool] = {}
    verdicts = {}
    seen = []
    for report in reports:
        seen.append(report)
        for verdict in asha.decide(ASHA, members, seen, decided, gone):
            assert (verdict.member, verdict.rung) not in decided, "a member decided twice for one rung"
            decided[(verdict.member, verdict.rung)] = verdict.promoted
            verdicts[(verdict.member, verdict.rung)] = verdict
    return verdicts


@given(populations)
def test_a_rung_reported_at_once_promotes_exactly_the_top_fraction(scores) -> None:
    members = list(range(1, len(scores) + 1))
    verdicts = asha.decide(ASHA, members, first_rung(scores), {})
    promoted = [verdict.member for verdict in verdicts if verdict.promoted]
    assert len(verdicts) == len(members)  # the rung is complete: every member is decided, once
    assert len(promoted) == max(1, kept_count(len(members), ASHA.keep))
    worst_promoted = min(scores[member - 1] for member in promoted)
    for verdict in verdicts:
        if not verdict.promoted and not math.isnan(worst_promoted):
            assert math.isnan(scores[verdict.member - 1]) or scores[verdict.member - 1] <= worst_promoted
            assert verdict.reason.startswith("stopped by ASHA at rung 1: eval_return ")


@given(populations, st.randoms(use_true_random=False))
def test_promotions_arrive_as_reports_do_and_are_never_taken_back(scores, shuffler) -> None:
    members = list(range(1, len(scores) + 1))
    reports = first_rung(scores)
    shuffler.shuffle(reports)
    verdicts = run_asha(members, reports)
    at_once = {(verdict.member, verdict.rung): verdict for verdict in asha.decide(ASHA, members, reports, {})}
    assert set(verdicts) == set(at_once)  # every member decided once the rung is complete
    # The members promoted at once, and only they, are promoted however the reports arrived.
    assert {key for key, verdict in at_once.items() if verdict.promoted} == {
        key for key, verdict in verdicts.items() if verdict.promoted}


@given(populations, st.randoms(use_true_random=False))
def test_the_same_reports_give_the_same_decisions_in_any_order(scores, shuffler) -> None:
    members = list(range(1, len(scores) + 1))
    reports = first_rung(scores)
    shuffled = list(reports)
    shuffler.shuffle(shuffled)
    assert asha.decide(ASHA, members, reports, {}) == asha.decide(ASHA, members, shuffled, {})


def test_a_member_is_promoted_only_when_no_report_to_come_can_push_it_out_and_stopped_once_its_rung_is_complete():
    """Issue 50 item 2: half a rung reported promotes nobody (its best may be passed by those still to come)."""
    members = [1, 2, 3, 4, 5, 6]
    early = [Report(1, RUNGS[0], 10.0), Report(2, RUNGS[0], 5.0), Report(3, RUNGS[0], 7.0)]
    assert asha.decide(ASHA, members, early, {}) == []
    # Five of six reported: the best stays in the top 2 of 6 even if member 6 passes it, and ranks 1 of 5.
    late = early + [Report(4, RUNGS[0], 143.0), Report(5, RUNGS[0], 1.0)]
    verdicts = asha.decide(ASHA, members, late, {})
    assert [(verdict.member, verdict.promoted) for verdict in verdicts] == [(4, True)]
    assert verdicts[0].reason == ("promoted by ASHA at rung 1: eval_return 143 ranks 1 of 5 "
                                  "(kept: top 2 of at most 6; the 1 still to come cannot push it out)")
    # Member 6 is gone (killed): the rung completes with five reports, and its quota is theirs.
    verdicts = asha.decide(ASHA, members, late, {(4, 0): True}, gone={6})
    assert {verdict.member: verdict.promoted for verdict in verdicts} == {1: False, 3: False, 2: False, 5: False}
    stopped = next(verdict for verdict in verdicts if verdict.member == 2)
    assert stopped.reason == "stopped by ASHA at rung 1: eval_return 5 ranks 4 of 5 (kept: top 1)"


def test_the_next_rung_waits_for_the_promoted_only_and_cascades_in_one_call() -> None:
    members = [1, 2, 3]
    reports = [Report(1, RUNGS[0], 3.0), Report(2, RUNGS[0], 2.0), Report(3, RUNGS[0], 1.0),
               Report(1, RUNGS[1], 9.0)]
    verdicts = asha.decide(ASHA, members, reports, {})
    # Rung 1 keeps member 1 alone, so rung 2 is complete with its one report: it goes on to rung 3.
    assert [(verdict.member, verdict.rung, verdict.promoted) for verdict in verdicts] == [
        (1, 0, True), (2, 0, False), (3, 0, False), (1, 1, True)]
    # A stopped member's later report (a resume by hand) decides nothing more.
    assert asha.decide(ASHA, members, reports + [Report(2, RUNGS[1], 99.0)],
                       {(verdict.member, verdict.rung): verdict.promoted for verdict in verdicts}) == []


PBT = pbt.PbtSettings(interval=20_000, quantile=0.25,
                      perturb={"dqn.lr": (0.8, 1.25), "dqn.exploration_final": (0.8, 1.25)})


def best_first(report: Report) -> tuple:
    """The ranking written out again, independently of rlsup's: NaN last, then by value, then by member."""
    missing = math.isnan(report.value)
    return (missing, 0.0 if missing else -report.value, report.member)


def generation(scores: list[float], step: int = 40_000) -> tuple[list[Report], dict]:
    reports = [Report(member, step, value) for member, value in enumerate(scores, 1)]
    values = {member: {"dqn.lr": 3e-4 * member, "dqn.exploration_final": 0.01}
              for member in range(1, len(scores) + 1)}
    return reports, values


@settings(max_examples=60)
@given(populations, st.integers(0, 2**32), st.randoms(use_true_random=False))
def test_pbt_forks_the_bottom_quantile_from_the_top_the_same_way_every_time(scores, seed, shuffler) -> None:
    reports, values = generation(scores)
    forks = pbt.decide(PBT, seed, reports, values)
    shuffled = list(reports)
    shuffler.shuffle(shuffled)
    assert pbt.decide(PBT, seed, shuffled, values) == forks  # re-derived after a crash: the same draws
    count = kept_count(len(scores), PBT.quantile)
    assert len(forks) == count and len({fork.member for fork in forks}) == count
    order = [report.member for report in sorted(reports, key=best_first)]
    top, bottom = set(order[:count]), set(order[len(order) - count:])
    for fork in forks:
        assert fork.member in bottom and fork.parent in top and fork.member != fork.parent
        for name, value in fork.values.items():
            assert any(math.isclose(value, values[fork.parent][name] * factor) for factor in PBT.perturb[name])


def test_a_pbt_decision_says_who_forks_whom_with_what() -> None:
    reports, values = generation([412.0, 300.0, 200.0, 88.0])
    (fork,) = pbt.decide(PBT, 7, reports, values)
    assert (fork.member, fork.parent, fork.step) == (4, 1, 40_000)
    assert fork.reason.startswith("pbt: member 4 (eval_return 88) forks member 1 (eval_return 412) at step 40,000 "
                                  "with dqn.exploration_final 0.01 -> ")
    assert "dqn.lr 0.0003 -> " in fork.reason
    # Another seed or generation draws its own factors; the experiment's own seed always the same ones.
    draws = {tuple(pbt.decide(PBT, seed, reports, values)[0].values.values()) for seed in range(40)}
    assert len(draws) == 4


def test_reports_from_two_steps_are_not_one_generation() -> None:
    reports = [Report(1, 40_000, 1.0), Report(2, 20_000, 2.0)]
    try:
        pbt.decide(PBT, 1, reports, {})
    except ValueError as error:
        assert "one multiple of 20000 steps" in str(error)
    else:
        raise AssertionError("reports from two steps were taken for one generation")



def lr_factor_of(fork_values: dict, parent_values: dict) -> float:
    return fork_values["dqn.lr"] / parent_values["dqn.lr"]


@settings(max_examples=80)
@given(populations, st.integers(0, 2**32), st.randoms(use_true_random=False), st.data())
def test_a_refused_fork_is_drawn_again_and_a_weak_member_no_fork_can_replace_is_kept(scores, seed, shuffler,
                                                                                     data) -> None:
    """issue 49 item 7: a fork whose values the loader refuses is never made. Another parent of the top and other
    factors are drawn; only when no combination loads is the weak member kept (it goes on), never lost."""
    reports, values = generation(scores)
    refused_parents = data.draw(st.sets(st.integers(1, len(scores))))
    refused_factor = data.draw(st.sampled_from([None, 0.8, 1.25]))

    def refuses(parent: int, chosen: dict) -> str | None:
        factor = lr_factor_of(chosen, values[parent])
        bad = parent in refused_parents or (refused_factor and math.isclose(factor, refused_factor))
        return "dqn.lr: refused" if bad else None

    outcomes = pbt.decide(PBT, seed, reports, values, refuses)
    shuffled = list(reports)
    shuffler.shuffle(shuffled)
    assert pbt.decide(PBT, seed, shuffled, values, refuses) == outcomes  # the same after a crash
    count = kept_count(len(scores), PBT.quantile)
    order = [report.member for report in sorted(reports, key=best_first)]
    top, bottom = order[:count], order[len(order) - count:]
    assert sorted(outcome.member for outcome in outcomes) == sorted(bottom)  # each weak member once, either way
    for outcome in outcomes:
        if isinstance(outcome, pbt.Fork):
            assert outcome.parent in top and refuses(outcome.parent, outcome.values) is None
        else:
            assert isinstance(outcome, pbt.Continue) and outcome.reason.endswith("(dqn.lr: refused)")
            every = [{name: values[parent][name] * factor for name, factor in zip(sorted(PBT.perturb), factors)}
                     for parent in top for factors in itertools.product(*(PBT.perturb[name]
                                                                          for name in sorted(PBT.perturb)))]
            assert all(refuses(parent, chosen) for parent, chosen in zip([p for p in top for _ in range(4)], every))
    # Nothing refused: the very draws a generation made before forks were checked.
    assert pbt.decide(PBT, seed, reports, values, lambda parent, chosen: None) == pbt.decide(PBT, seed, reports,
                                                                                           values)


SIMULATED = pbt.PbtSettings(interval=100, quantile=0.25, perturb={"dqn.lr": (0.8, 1.25)}, metric="return")


class Population:
    """PBT's members as the daemon drives them, through the pure functions it calls: each trains to its next
    generation's step and waits there until a decision lets it go on (or replaces it)."""

    def __init__(self, total: int, scores: list[float]):
        self.total, self.scores = total, scores
        self.step: dict[int, int] = {}
        self.waiting: set[int] = set()
        self.gone: set[int] = set()       # done, killed, or (for the generations after) replaced
        self.born: dict[int, int] = {}
        self.replaced: dict[int, int] = {}
        self.reports: list[Report] = []
        self.decided: dict[tuple[int, int], str] = {}

    def join(self, step: int = 0) -> int:
        member = len(self.step) + 1
        self.step[member] = step
        return member

    def movable(self) -> list[int]:
        return [member for member in self.step if member not in self.waiting and member not in self.gone
                and member not in self.replaced]

    def advance(self, member: int) -> None:
        """It trains to its next generation's step and reports there, or to its end."""
        following = (self.step[member] // SIMULATED.interval + 1) * SIMULATED.interval
        if following >= self.total:
            self.step[member] = self.total
            self.gone.add(member)
            return
        self.step[member] = following
        self.reports.append(Report(member, following, self.scores[(member * 7 + following) % len(self.scores)]))
        self.waiting.add(member)

    def go_on(self, member: int, step: int) -> None:
        assert (member, step) not in self.decided, "a member decided twice at one step"
        self.decided[(member, step)] = "continued"
        self.waiting.discard(member)

    def decide(self) -> None:
        """What deciding.decide_pbt does at a reconcile."""
        taken = {step for (_, step), verdict in self.decided.items() if verdict in ("continued", "replaced")}
        for late in pbt.late_arrivals(SIMULATED, self.reports, taken, set(self.decided), self.gone):
            self.go_on(late.member, late.step)
        reported = {(report.member, report.step): report for report in self.reports}
        for step in sorted({step for _, step in reported} - taken):
            expected = pbt.live_at(step, list(self.step), self.gone, self.born, self.replaced)
            if expected and all((member, step) in reported for member in expected):
                values = {member: {"dqn.lr": 1e-3} for member in expected}
                for outcome in pbt.decide(SIMULATED, 1, [reported[(member, step)] for member in expected], values):
                    if isinstance(outcome, pbt.Fork):
                        fork = self.join(step)
                        self.born[fork] = step
                        self.decided[(fork, step)] = "forked"
                        self.replaced[outcome.member] = step
                        self.decided[(outcome.member, step)] = "replaced"
                        self.waiting.discard(outcome.member)
                for member in expected:
                    if member not in self.replaced:
                        self.go_on(member, step)
                return


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(0, 3), st.integers(2, 4), st.lists(values, min_size=1, max_size=8),
       st.randoms(use_true_random=False))
def test_members_that_join_late_or_are_killed_never_stall_a_pbt_experiment(first, joining, generations, scores,
                                                                           chooser) -> None:
    """issue 49 item 5: seeds that joined after a generation held at its step, which was decided, and every later
    generation waited for them for good. Whatever the order members train, join and are killed in, every member
    ends trained to its end, replaced, or killed; none waits for ever, and none is decided twice at a step."""
    population = Population(SIMULATED.interval * generations, scores)
    for _ in range(first):
        population.join()
    killed_left = 1
    while True:
        choices = [("advance", member) for member in population.movable()] + [("join", 0)] * (joining > 0)
        choices += [("kill", member) for member in population.step if member not in population.gone
                    and member not in population.replaced] * (killed_left > 0)
        if not choices:
            break
        action, member = chooser.choice(choices)
        if action == "advance":
            population.advance(member)
        elif action == "join":
            joining -= 1
            population.join()
        else:
            killed_left -= 1
            population.gone.add(member)
            population.waiting.discard(member)
        population.decide()
    stuck = [member for member in population.waiting if member not in population.gone]
    assert not stuck, (stuck, population.reports, population.decided)
