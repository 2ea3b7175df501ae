"""Population-based training (Jaderberg et al. 2017): every interval, the bottom quantile forks the top.

At each interval's step, once every live member has reported there, each member in the bottom `quantile`
is replaced by a fork of a member drawn from the top quantile, made from that member's checkpoint at the
step, with each perturbed field its value times a factor drawn from the field's list. The draws come from
a stream seeded by the experiment's seed and the generation, so the same reports give the same forks.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from rlsup.decisions.ranking import Report, figure, kept_count, ranked


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


def decide(settings: PbtSettings, seed: int, reports: Sequence[Report],
           values: Mapping[int, Mapping[str, float]]) -> list[Fork]:
    """The forks of one generation, from every live member's report at the same interval step.

    `values` holds each member's current value of every perturbed field. Pure and seeded: a daemon that
    died mid-generation draws the same forks again from the same reports."""
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
    forks = []
    for weak in bottom:
        strong = top[stream.randrange(len(top))]
        chosen = {name: values[strong.member][name] * factor(stream, settings.perturb[name])
                  for name in sorted(settings.perturb)}
        changes = ", ".join(f"{name} {values[strong.member][name]:.3g} -> {value:.3g}"
                            for name, value in chosen.items())
        reason = (f"pbt: member {weak.member} ({settings.metric} {figure(weak.value)}) forks member {strong.member} "
                  f"({settings.metric} {figure(strong.value)}) at step {step:,} with {changes}")
        forks.append(Fork(weak.member, strong.member, step, chosen, reason))
    return forks


def factor(stream: random.Random, factors: Sequence[float]) -> float:
    return factors[stream.randrange(len(factors))]
