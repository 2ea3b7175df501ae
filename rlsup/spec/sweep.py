"""A job file's [sweep] table: identity fields, each with the list of values an experiment runs it at."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from rlsup.spec.values import check_value, shown
from rlsup.spec.fields import ARRAY_TABLES, IDENTITY, TABLES, dotted_names, field_types, section_field
from rlsup.spec.locating import Located, Problem, suggestion

SWEEP_TABLE = "sweep"
# A linked field's inline table: the crossed field it follows, and its value for each of the leader's.
LEADER, VALUES = "follows", "values"
# A typo such as --seeds 1-10000, or a sweep of three lists of 1,000, is refused rather than queued as that many
# jobs. A sweep is refused on its count alone: building 10^6 variants took 10 s and 630 MB, 10^9 never ended.
MAX_JOBS = 1000
# The seed has its own argument: `rlsup submit --seeds` crosses it with every variant.
NOT_SWEPT = {"job.seed": "seeds are given by `rlsup submit --seeds 1-5`, which crosses them with every variant"}


@dataclass(frozen=True)
class Sweep:
    """Swept fields ("dqn.lr") in file order, each with its values; empty for a file without [sweep].

    A linked field (`"vtrace.entropy_cost" = { follows = "env.id", values = [...] }`) is not crossed: it
    takes the value at the position of its leader's value, so each game of a sweep over games can have
    its own. It adds no variants and no part to a variant's name."""

    fields: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    linked: tuple[tuple[str, str, tuple[Any, ...]], ...] = ()   # (field, the swept field it follows, values)

    def count(self) -> int:
        """How many variants there are, without making them (1 without a sweep)."""
        return math.prod(len(values) for _, values in self.fields)

    def variants(self) -> list[dict[str, Any]]:
        """Every combination of the values (the first field varies slowest), each linked field beside its
        leader's value; one empty variant without a sweep."""
        names = [name for name, _ in self.fields]
        positions = [range(len(values)) for _, values in self.fields]
        variants = []
        for combination in itertools.product(*positions):
            at = dict(zip(names, combination))
            variant = {name: values[at[name]] for name, values in self.fields}
            variant.update({name: values[at[leader]] for name, leader, values in self.linked})
            variants.append(variant)
        return variants

    @property
    def names(self) -> tuple[str, ...]:
        """Every field a variant sets: the crossed ones, then the linked ones."""
        return tuple(name for name, _ in self.fields) + tuple(name for name, _, _ in self.linked)


def sweepable() -> list[tuple[str, Any]]:
    """Every field a [sweep] may list, as ("dqn.lr", its type): the identity fields of the tables but the seed."""
    return [(f"{section}.{name}", hint) for section, cls in TABLES.items()
            for name, hint in field_types(cls).items()
            if section_field(cls, name).metadata["edit"] == IDENTITY and f"{section}.{name}" not in NOT_SWEPT]


def read_sweep(table: Any, located: Located) -> tuple[Sweep, list[Problem]]:
    """The [sweep] table as a Sweep, and each problem with it located at its line."""
    if not isinstance(table, dict):
        example = '"dqn.lr" = [1e-4, 3e-4]'
        return Sweep(), [located.problem((SWEEP_TABLE,), f"must be a table [sweep] of lists, e.g. {example}")]
    fields, links, problems = [], [], []
    first_lines: dict[str, int | None] = {}
    for name, keys, values in _flatten(table):
        where = (SWEEP_TABLE, *keys)
        line = located.line(where)
        linked = isinstance(values, dict)
        link = values if linked else None
        if linked:
            leader, values = link.get(LEADER), link.get(VALUES)
        problem = (_repeat_problem(name, first_lines, line) or _field_problem(name)
                   or (linked and _link_problem(link)) or _values_problem(name, values, distinct=not linked))
        if problem:
            problems.append(Problem(located.file, line, f"{SWEEP_TABLE}.{name}", problem))
        elif linked:
            links.append((where, name, leader, tuple(_converted(name, value) for value in values)))
        else:
            fields.append((name, tuple(_converted(name, value) for value in values)))
    crossed = dict(fields)
    linked_fields = []
    for where, name, leader, values in links:
        problem = _leader_problem(leader, values, crossed)
        if problem:
            problems.append(Problem(located.file, located.line(where), f"{SWEEP_TABLE}.{name}", problem))
        else:
            linked_fields.append((name, leader, values))
    sweep = Sweep(tuple(fields), tuple(linked_fields))
    if sweep.count() > MAX_JOBS:
        sizes = " x ".join(f"{len(values):,}" for _, values in sweep.fields)
        problems.append(located.problem((SWEEP_TABLE,), f"its lists ({sizes} values) make {sweep.count():,} "
                                        f"variants; one submit queues at most {MAX_JOBS:,} jobs"))
    return sweep, problems


def _flatten(table: dict, keys: tuple[str, ...] = ()) -> list[tuple[str, tuple[str, ...], Any]]:
    """'"dqn.lr" = [..]' and 'dqn.lr = [..]' (a nested table to TOML) both as ("dqn.lr", their keys, [..]): the
    keys as locate_keys records them, ("dqn.lr",) and ("dqn", "lr"); a link's inline table ({ follows = ..,
    values = .. }) stays whole."""
    flat = []
    for key, value in table.items():
        nested = isinstance(value, dict) and not (LEADER in value or VALUES in value)
        flat.extend(_flatten(value, (*keys, key)) if nested else [(".".join((*keys, key)), (*keys, key), value)])
    return flat


def _repeat_problem(name: str, first_lines: dict[str, int | None], line: int | None) -> str | None:
    """A field given again in another spelling ("dqn.lr" and [sweep.dqn] lr, which TOML keeps apart): one list
    would silently replace the other, and its variants would be trained twice while others never were."""
    if name not in first_lines:
        first_lines[name] = line
        return None
    first = first_lines[name]
    at = f"at line {first}" if first else "above"
    return f"is swept twice: its first list is {at}; give one list of every value to try"


def _link_problem(link: dict) -> str | None:
    example = f'{{ {LEADER} = "env.id", {VALUES} = [0.01, 0.03] }}'
    unknown = sorted(set(link) - {LEADER, VALUES})
    if unknown:
        return f"a linked field has no key {unknown[0]!r}: it is an inline table {example}"
    if not isinstance(link.get(LEADER), str) or VALUES not in link:
        return f"a linked field is an inline table {example}"
    return None


def _leader_problem(leader: str, values: tuple, crossed: dict[str, tuple]) -> str | None:
    """A link must follow a crossed field of this [sweep], with one value for each of the leader's."""
    if leader not in crossed:
        known = ", ".join(f'"{name}"' for name in crossed) or "none"
        return f"follows {leader!r}, which is not a crossed field of this [sweep] (those are: {known})"
    if len(values) != len(crossed[leader]):
        return (f"lists {len(values)} values for the {len(crossed[leader])} of {leader!r}: one each, "
                "in the same order")
    return None


def _field_problem(name: str) -> str | None:
    section, _, field = name.partition(".")
    if section in ARRAY_TABLES:
        return f"fields of [[{section}]] cannot be swept (copy the file for each {section} layout)"
    if section not in TABLES or field not in field_types(TABLES[section]):
        return ("unknown field" + suggestion(name, dotted_names())
                + '; sweep keys are dotted field names such as "dqn.lr"')
    if name in NOT_SWEPT:
        return NOT_SWEPT[name]
    edit = section_field(TABLES[section], field).metadata["edit"]
    if edit != IDENTITY:
        return (f"is a {edit} field, and only identity fields are swept: a {edit} field is edited in the file "
                "for every job of the experiment at once")
    return None


def _values_problem(name: str, values: Any, *, distinct: bool = True) -> str | None:
    if not isinstance(values, list):
        return f"must be a list of values, e.g. [{values!r}], not a single value"
    if not values:
        return "needs at least one value"
    if len(values) > MAX_JOBS:  # before the checks below, of which the repeat check is quadratic
        return f"lists {len(values):,} values; one submit queues at most {MAX_JOBS:,} jobs"
    section, _, field = name.partition(".")
    cls = TABLES[section]
    for value in values:
        error = check_value(value, field_types(cls)[field], section_field(cls, field).metadata)
        if error:
            return f"value {shown(value)} {error}"
    if not distinct:
        return None  # a linked field may give two games one value
    repeated = [value for index, value in enumerate(values) if value in values[:index]]
    return f"lists {repeated[0]!r} twice" if repeated else None


def _converted(name: str, value: Any) -> Any:
    section, _, field = name.partition(".")
    return float(value) if field_types(TABLES[section])[field] is float else value

