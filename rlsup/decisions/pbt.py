"""Population-based training (Jaderberg et al. 2017): every interval, the bottom quantile forks the top.

At each interval's step, once every live member has reported there, each member in the bottom `quantile`
is replaced by a fork of a member drawn from the top quantile, made from that member's checkpoint at the
step, with each perturbed field its value times a factor drawn from the field's list. The draws come from
a stream seeded by the experiment's seed and the generation, so the same reports give the same forks.
A member that reaches a generation taken without it (a seed that joined later) goes on at once.
"""
from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from rlsup.decisions.ranking import Report, figure, kept_count, ranked

# Draws tried for a weak member when a fork's values are refused: every parent and factor combination when there
# are at most this many, else this many more draws. A few fields of a few factors each stay well within it.
DRAWS = 64


@dataclass(frozen=True)
class PbtSettings:
    interval: int                               # steps between generations
    quantile: float                             # the bottom and the top fraction, 0 < quantile <= 0.5
    perturb: Mapping[str, Sequence[float]]      # "dqn.lr" -> factors to multiply it by
    metric: str = "eval_return"


@dataclass(frozen=True)
class Fork:
    """`member` is replaced by a fork of `parent`'s checkpoint at `step`, with `values` for the perturbed fields."""

    member: int
    parent: int
    step: int
    values: Mapping[str, float]
    reason: str


@dataclass(frozen=True)
class Continue:
    """`member` goes on from `step` as it is: a weak one no fork could replace, or one that came late."""

    member: int
    step: int
    reason: str


# Why a fork of `parent` with these values cannot be made (the job loader's words), or None: the daemon's check.
Refusal = Callable[[int, Mapping[str, float]], "str | None"]


def decide(settings: PbtSettings, seed: int, reports: Sequence[Report], values: Mapping[int, Mapping[str, float]],
           refuses: Refusal | None = None) -> list[Fork | Continue]:
    """The forks of one generation, from every live member's report at the same interval step.

    `values` holds each member's current value of every perturbed field. A fork `refuses` names a reason for is
    drawn again (another parent of the top, other factors); a weak member no draw can replace is kept, a
    Continue. Pure and seeded: a daemon that died mid-generation draws the same forks again from the same
    reports (`refuses` reads only the members' own job files, which PBT's identity fields keep unchanged)."""
    if not reports:
        return []
    step = reports[0].step
    if any(report.step != step for report in reports) or step <= 0 or step % settings.interval:
        raise ValueError(f"a PBT generation compares reports at one multiple of {settings.interval} steps")
    order = ranked(reports)
    count = kept_count(len(order), settings.quantile)
    if count == 0:
        return []
    top, bottom = order[:count], order[-count:]
    stream = random.Random(f"rlsup-pbt:{seed}:{step // settings.interval}")
    return [replacement(settings, stream, weak, top, values, refuses or (lambda parent, chosen: None))
            for weak in bottom]


def replacement(settings: PbtSettings, stream: random.Random, weak: Report, top: Sequence[Report],
                values: Mapping[int, Mapping[str, float]], refuses: Refusal) -> Fork | Continue:
    """The first draw whose fork is not refused, or the weak member kept with the last refusal's reason."""
    names = sorted(settings.perturb)
    why = None
    for strong, factors in draws(settings, stream, top, names):
        chosen = {name: values[strong.member][name] * factor for name, factor in zip(names, factors)}
        why = refuses(strong.member, chosen)
        if why is None:
            changes = ", ".join(f"{name} {values[strong.member][name]:.3g} -> {value:.3g}"
                                for name, value in chosen.items())
            reason = (f"pbt: member {weak.member} ({settings.metric} {figure(weak.value)}) forks member "
                      f"{strong.member} ({settings.metric} {figure(strong.value)}) at step {weak.step:,} with "
                      f"{changes}")
            return Fork(weak.member, strong.member, weak.step, chosen, reason)
    standing = f"{settings.metric} {figure(weak.value)}"
    return Continue(weak.member, weak.step, f"pbt: member {weak.member} ({standing}) is kept: no fork drawn from "
                                            f"the top members with the listed factors loads ({why})")


def draws(settings: PbtSettings, stream: random.Random, top: Sequence[Report],
          names: list[str]) -> Iterator[tuple[Report, tuple[float, ...]]]:
    """A parent and a factor per field: first the one draw a generation always made, then, should that fork be
    refused, every other combination in a drawn order (or DRAWS more draws where there are more)."""
    yield top[stream.randrange(len(top))], tuple(factor(stream, settings.perturb[name]) for name in names)
    choices = [range(len(top))] + [range(len(settings.perturb[name])) for name in names]
    if math.prod(len(choice) for choice in choices) <= DRAWS:
        every = list(itertools.product(*choices))
        stream.shuffle(every)
        for parent, *picked in every:
            yield top[parent], tuple(settings.perturb[name][index] for name, index in zip(names, picked))
        return
    for _ in range(DRAWS):
        yield top[stream.randrange(len(top))], tuple(factor(stream, settings.perturb[name]) for name in names)


def factor(stream: random.Random, factors: Sequence[float]) -> float:
    return factors[stream.randrange(len(factors))]


def live_at(step: int, members: Iterable[int], gone: Collection[int], born: Mapping[int, int],
            replaced: Mapping[int, int]) -> list[int]:
    """The members a generation at `step` waits for: not gone (killed, failed, done), made before it (a fork is
    made at its generation's step), and not replaced at an earlier one."""
    return [member for member in members if member not in gone and born.get(member, 0) < step
            and replaced.get(member, step) >= step]


def late_arrivals(settings: PbtSettings, reports: Iterable[Report], taken: Collection[int],
                  decided: Collection[tuple[int, int]], gone: Collection[int] = ()) -> list[Continue]:
    """Live members that reported at a generation already taken without them (seeds that joined the experiment
    after it, a member resumed by hand after it was killed): each goes on at once, and is compared from the next
    generation it reaches. A generation is never taken again: its forks came from the members it waited for."""
    late = sorted((report for report in reports if report.step in taken and report.member not in gone
                   and (report.member, report.step) not in decided), key=lambda report: (report.step, report.member))
    return [Continue(report.member, report.step,
                     f"pbt: member {report.member} reached step {report.step:,} after generation "
                     f"{report.step // settings.interval} was taken without it; it goes on, compared from the next")
            for report in late]
