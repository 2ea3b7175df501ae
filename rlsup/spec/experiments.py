"""Experiments: the seeds and [sweep] variants of one job file, planned as the jobs one submit queues."""
from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from rlsup import spec as specs
from rlsup.spec.values import INT64_MAX
from rlsup.spec.locating import Located, Problem
from rlsup.spec.sweep import MAX_JOBS
DECIMAL_WIDTH = 16  # characters of a number in a variant's name before its exponent is kept (decimal_digits)
SEEDS_FORMS = "give seeds as 1-5, 1,4,9 or both (1-3,7)"


class SeedsError(ValueError):
    """A --seeds argument that does not name seeds; the message is one sentence naming the argument."""


@dataclass(frozen=True)
class PlannedJob:
    """One job of an experiment: its name and the values it holds over the file (swept fields, its seed)."""

    name: str
    values: dict[str, Any]


def parse_seeds(text: str) -> tuple[int, ...]:
    """ "1-5" -> (1, 2, 3, 4, 5); "1,4,9" and mixtures ("1-3,7") too; raises SeedsError."""
    seeds: list[int] = []
    for part in text.split(","):
        # ASCII only: \d alone also matches '١' or '１', which int() reads, so '١-٣' queued seeds 1 to 3.
        match = re.fullmatch(r"\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?", part, re.ASCII)
        if not match:
            raise SeedsError(f"--seeds {text!r}: {part.strip()!r} is not a seed or a range; {SEEDS_FORMS}")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise SeedsError(f"--seeds {text!r}: the range {part.strip()} runs backwards; write {last}-{first}")
        if last > INT64_MAX:
            raise SeedsError(f"--seeds {text!r}: seeds go up to {INT64_MAX}")
        if len(seeds) + last - first + 1 > MAX_JOBS:
            raise SeedsError(f"--seeds {text!r}: more than {MAX_JOBS} seeds; queue fewer at a time")
        seeds.extend(range(first, last + 1))
    repeated = sorted({seed for index, seed in enumerate(seeds) if seed in seeds[:index]})
    if repeated:
        raise SeedsError(f"--seeds {text!r}: seed {repeated[0]} is given twice")
    return tuple(seeds)


def plan(sweep: specs.Sweep, seeds: tuple[int, ...] | None, experiment: str) -> list[PlannedJob]:
    """The jobs of variants x seeds, named readably ("cartpole-lr0.0003-s2"); without seeds, the file's seed."""
    count = sweep.count() * len(seeds or (None,))
    if count > MAX_JOBS:  # counted before any job is made
        raise SeedsError(f"the experiment would queue {count:,} jobs; at most {MAX_JOBS:,} go in one submit")
    labels = field_labels([name for name, _ in sweep.fields])
    planned = []
    for variant in sweep.variants():
        for seed in seeds or (None,):
            values = dict(variant) if seed is None else {**variant, "job.seed": seed}
            # A linked field's value follows from its leader's, which the name already holds.
            parts = [f"{labels[name]}{compact(value)}" for name, value in variant.items() if name in labels]
            parts += [f"s{seed}"] if seed is not None else []
            planned.append(PlannedJob(specs.sanitize_name("-".join([experiment, *parts])), values))
    return unique_names(planned)


def field_labels(fields: list[str]) -> dict[str, str]:
    """Each swept field's label in job names: its own name ("lr"), dotted where two share one."""
    short = {name: name.rsplit(".", 1)[-1] for name in fields}
    return {name: label if list(short.values()).count(label) == 1 else name for name, label in short.items()}


def compact(value: Any) -> str:
    """A value as it reads in a variant's name: 0.0003 -> "0.0003", 0.99 -> "0.99", [64, 64] -> "64x64"."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return decimal_digits(value)
    if isinstance(value, list):
        return "x".join(compact(item) for item in value)
    return str(value)


def decimal_digits(value: float) -> str:
    """Every number in positional decimal, never with an exponent: 1e-3 -> "0.001", 2.5e-5 -> "0.000025".

    One format for all, where the shorter of the two made lr1e-3 beside lr0.0023. Decimal, not scientific,
    because names sort as text (ls, the TUI's filter, `rlsup list`): decimals below 1 (learning rates,
    discounts, exploration rates: what sweeps list) sort by value, while 1e-3, 1e-4, 5e-4 sort as no value
    does. The price is length at small values: 0.00001 is 7 characters against 4, well within a name's 64.
    The digits are repr's, the shortest that read back as the same float. Only a value whose decimal would
    pass DECIMAL_WIDTH characters (below about 1e-14, or beyond 1e16: no rate or discount) keeps repr's
    exponent, so that 1e-300 is not a name of 302 characters cut to 64.
    """
    digits = format(Decimal(repr(value)), "f")
    digits = digits.rstrip("0").rstrip(".") if "." in digits else digits
    return digits if len(digits) <= DECIMAL_WIDTH else repr(value).replace("e-0", "e-").replace("e+", "e")


def unique_names(planned: list[PlannedJob]) -> list[PlannedJob]:
    """Names cut to their 64 characters, or sanitised alike, get their position: every job name differs."""
    names = [job.name for job in planned]
    if len(set(names)) == len(names):
        return planned
    return [PlannedJob(specs.sanitize_name(f"{job.name[:56]}-v{index + 1}"), job.values)
            for index, job in enumerate(planned)]


def variant_spec(loaded: specs.JobSpec, job: PlannedJob) -> specs.JobSpec:
    """The file's spec with the job's values in place."""
    for name, value in job.values.items():
        section, field = name.split(".", 1)
        loaded = loaded.replace(section, **{field: value})
    return loaded


def check_variants(loaded: specs.JobSpec, planned: list[PlannedJob], file: str, text: str) -> None:
    """Raise SpecError when a variant breaks a cross-field rule, located at its swept fields' lines."""
    located = Located(file, text)
    problems = []
    for job in planned:
        for violation in specs.job_violations(variant_spec(loaded, job)):
            swept = [name for name in job.values if name != "job.seed"]
            line = next((located.line((specs.SWEEP_TABLE, name)) for name in swept), None)
            problems.append(Problem(file, line or located.line(violation.path), specs.dotted(violation.path),
                                    f"in variant {job.name}: {violation.message}"))
    if problems:
        raise specs.SpecError(problems)


# Per-job values that are not a variant's: every job of an experiment has its own seed and name.
NOT_VARIANT = ("job.seed", "job.name")


def variant_label(overrides: dict) -> str:
    """The swept values a job holds (from its pinned overrides), as "dqn.lr=3e-4"; "" for seeds alone."""
    pinned = {name: entry["value"] for name, entry in overrides.items()
              if entry.get("pinned") and name not in NOT_VARIANT}
    return " ".join(f"{name}={compact(value)}" for name, value in pinned.items())  # in the [sweep]'s order
