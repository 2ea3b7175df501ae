"""A job file's [scheduler] table: successive halving (ASHA) or PBT over an experiment, read with located errors."""
from __future__ import annotations

import json
from typing import Any, Callable, Union

from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.pbt import PbtSettings
from rlsup.formatting import finite
from rlsup.spec.fields import TABLES, JobSpec, dotted_names, field_types
from rlsup.spec.locating import Located, Problem, suggestion
from rlsup.spec.values import STEPS_MAX, shown

SCHEDULER_TABLE = "scheduler"
# What members are compared by, each as its worker measures it where the experiment compares them.
METRICS = {"eval_return": "the greedy mean of an [eval] run there",
           "return": "the mean return of the recent training episodes"}
# Each kind's keys, the required ones first; `kind` and `metric` are every kind's.
KEYS = {"asha": ("rungs", "keep"), "pbt": ("interval", "quantile", "perturb")}
NAMES = {"asha": "an ASHA", "pbt": "a PBT"}
MAX_RUNGS = 64
Settings = Union[AshaSettings, PbtSettings]


def read_scheduler(table: Any, located: Located) -> tuple[Settings | None, list[Problem]]:
    """The table as ASHA's or PBT's settings, or None with each problem located at its line."""
    def problem(key: str | None, message: str) -> Problem:
        path = (SCHEDULER_TABLE,) if key is None else (SCHEDULER_TABLE, key)
        return located.problem(path, message)

    if not isinstance(table, dict):
        return None, [problem(None, 'must be a table [scheduler] with kind = "asha" or "pbt"')]
    kind = table.get("kind")
    if kind not in KEYS:
        return None, [problem("kind", f"must be one of {', '.join(map(repr, KEYS))}, not {shown(kind)}")]
    problems = [problem(key, f"is not a key of {NAMES[kind]} [scheduler]; its keys are kind, metric, "
                             + ", ".join(KEYS[kind]))
                for key in table if key not in ("kind", "metric", *KEYS[kind])]
    problems += [problem(None, f"{NAMES[kind]} [scheduler] needs {key}") for key in KEYS[kind] if key not in table]
    metric = table.get("metric", "eval_return")
    if metric not in METRICS:
        problems.append(problem("metric", f"must be one of {', '.join(map(repr, METRICS))} (no job records "
                                          f"{metric!r})"))
    if problems:
        return None, problems
    reader = _read_asha if kind == "asha" else _read_pbt
    settings, messages = reader(table, metric)
    return (None if messages else settings), [problem(key, message) for key, message in messages]


def _read_asha(table: dict, metric: str) -> tuple[AshaSettings | None, list[tuple[str, str]]]:
    rungs, keep = table["rungs"], table["keep"]
    messages = []
    if (not isinstance(rungs, list) or not rungs or len(rungs) > MAX_RUNGS
            or not all(_whole(rung) and 0 < rung <= STEPS_MAX for rung in rungs)):
        messages.append(("rungs", f"must be a list of 1 to {MAX_RUNGS} steps above 0, e.g. [20_000, 60_000]"))
    elif any(later <= earlier for earlier, later in zip(rungs, rungs[1:])):
        messages.append(("rungs", f"must increase: {rungs}"))
    if not _fraction(keep) or keep >= 1:
        messages.append(("keep", f"must be a number between 0 and 1 (the fraction promoted), not {shown(keep)}"))
    if messages:
        return None, messages
    return AshaSettings(tuple(rungs), float(keep), metric), []


def _read_pbt(table: dict, metric: str) -> tuple[PbtSettings | None, list[tuple[str, str]]]:
    interval, quantile, perturb = table["interval"], table["quantile"], table["perturb"]
    messages = []
    if not _whole(interval) or not 0 < interval <= STEPS_MAX:
        messages.append(("interval", f"must be a number of steps above 0, not {shown(interval)}"))
    if not _fraction(quantile) or quantile > 0.5:
        messages.append(("quantile", f"must be above 0 and at most 0.5 (the bottom and the top fraction), "
                                     f"not {shown(quantile)}"))
    if not isinstance(perturb, dict) or not perturb:
        messages.append(("perturb", 'must be a table of fields and factors, e.g. { "dqn.lr" = [0.8, 1.25] }'))
    else:
        messages += [("perturb", f"{name}: {why}") for name, factors in perturb.items()
                     for why in [_perturb_problem(name, factors)] if why]
    if messages:
        return None, messages
    factors = {name: tuple(float(factor) for factor in values) for name, values in perturb.items()}
    return PbtSettings(int(interval), float(quantile), factors, metric), []


def _perturb_problem(name: str, factors: Any) -> str | None:
    section, _, field = name.partition(".")
    hints = field_types(TABLES[section]) if section in TABLES else {}
    if field not in hints:  # offered among the number fields: the ones a member's fork may perturb
        return ("unknown field" + suggestion(name, dotted_names(float))
                + '; perturbed fields are numbers such as "dqn.lr"')
    if hints[field] is not float:
        return "is not a number field of the job (perturbed fields are numbers such as \"dqn.lr\")"
    if (not isinstance(factors, list) or not factors
            or not all(_number(factor) and 0 < factor <= 1e6 for factor in factors)):
        return "must list factors above 0 to multiply it by, e.g. [0.8, 1.25]"
    return None


def json_schema() -> dict:
    """The table's JSON Schema: one object per kind, each with its own keys (what read_scheduler reads)."""
    metric = {"enum": list(METRICS), "default": "eval_return",
              "description": "What members are compared by: " + "; ".join(f"{name}, {what}"
                                                                            for name, what in METRICS.items())}
    steps = {"type": "integer", "minimum": 1, "maximum": STEPS_MAX}
    fraction = {"type": "number", "exclusiveMinimum": 0}
    factors = {"type": "array", "minItems": 1, "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e6}}
    kinds = {
        "asha": {"rungs": {"type": "array", "minItems": 1, "maxItems": MAX_RUNGS, "items": steps,
                           "description": "Steps at which members are compared, increasing."},
                 "keep": {**fraction, "exclusiveMaximum": 1, "description": "The fraction promoted at each rung."}},
        "pbt": {"interval": {**steps, "description": "Steps between generations."},
                "quantile": {**fraction, "maximum": 0.5, "description": "The bottom and the top fraction."},
                "perturb": {"type": "object", "minProperties": 1, "additionalProperties": factors,
                            "description": 'Number fields and their factors: "dqn.lr" = [0.8, 1.25].'}},
    }
    return {"description": "Successive halving (ASHA) or population-based training (PBT) over the experiment.",
            "oneOf": [{"type": "object", "additionalProperties": False, "required": ["kind", *keys],
                       "properties": {"kind": {"const": kind}, "metric": metric, **keys}}
                      for kind, keys in kinds.items()]}


def check_against(settings: Settings, spec: JobSpec, located: Located,
                  fork_refuses: Callable[[str], str | None]) -> list[Problem]:
    """What the job's own fields rule out: a step no member reaches, a perturbed field fork refuses
    (fork_refuses names why, from the fork rules the spec layer does not hold)."""
    total = spec.job.total_steps
    if isinstance(settings, AshaSettings):
        late = [rung for rung in settings.rungs if rung >= total]
        if late:
            return [located.problem((SCHEDULER_TABLE, "rungs"), f"rung {late[0]:,} is not below the job's "
                                    f"total_steps ({total:,}): members would end before they are compared")]
        return []
    problems = []
    if settings.interval >= total:
        problems.append(located.problem((SCHEDULER_TABLE, "interval"), f"{settings.interval:,} is not below the "
                                        f"job's total_steps ({total:,}): no generation would ever be compared"))
    for name in settings.perturb:
        why = fork_refuses(name)
        if why:
            problems.append(located.problem((SCHEDULER_TABLE, "perturb"),
                                            f"{name}: a PBT member is a fork, and a fork refuses it: {why}"))
    return problems


def settings_json(settings: Settings) -> str:
    """The settings as the store keeps them for the experiment (read back by from_json)."""
    if isinstance(settings, AshaSettings):
        return json.dumps({"kind": "asha", "metric": settings.metric, "rungs": list(settings.rungs),
                           "keep": settings.keep})
    return json.dumps({"kind": "pbt", "metric": settings.metric, "interval": settings.interval,
                       "quantile": settings.quantile, "perturb": {name: list(values) for name, values in
                                                                  settings.perturb.items()}})


def from_json(text: str) -> Settings | None:
    """settings_json's text read back; None for text that is not a scheduler (a store written by hand)."""
    try:
        table = json.loads(text)
    except ValueError:
        return None
    settings, problems = read_scheduler(table, Located("<store>", ""))
    return None if problems else settings


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return finite(value)


def _fraction(value: Any) -> bool:
    return _number(value) and value > 0
