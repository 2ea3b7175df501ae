"""Checks of one job-file value against its field's type and range, and the ranges fields may declare."""
from __future__ import annotations

import typing
from typing import Any, Literal

# No integer may be wider than 64 bits (formatting.py says why); a field's own maximum is usually far lower.
from rlsup.formatting import INT64_MAX, INT64_MIN, finite
# Steps are divided and shown as floats (steps/s, ETA, progress bars): exact as doubles up to 2**53,
# which is also far beyond any training run.
STEPS_MAX = 2 ** 53
# Counts of things that each cost memory or a process (envs, actors, batch items, layer widths).
COUNT_MAX = 2 ** 20
# Replay items: even at one byte each 2**32 is 4 GB; the worker checks the real need against memory.
CAPACITY_MAX = 2 ** 32
# A wall-time budget: a century of seconds is beyond any run and still exact as a double.
WALL_SECONDS_MAX = 100 * 365 * 24 * 3600


def check_value(value: Any, annotation: Any, metadata: dict) -> str | None:
    """Why value does not fit the annotated type and bounds (list items included), or None when it does."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        choices = typing.get_args(annotation)
        if value not in choices or not isinstance(value, str):
            return f"must be one of {', '.join(repr(c) for c in choices)}, not {value!r}"
        return None
    if origin is list:
        (item_type,) = typing.get_args(annotation)
        if not isinstance(value, list):
            return f"must be a list of {item_type.__name__}, not {type_name(value)}"
        for item in value:
            error = check_value(item, item_type, metadata)
            if error:
                return f"every item {error}"
        return None
    if annotation is bool:
        return None if isinstance(value, bool) else f"must be true or false, not {type_name(value)}"
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {type_name(value)}"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"must fit in 64 bits (at most {INT64_MAX}), not {shown(value)}"
    elif annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, not {type_name(value)}"
        if isinstance(value, int) and not finite(value):  # a field's own bounds say it better, where it has them
            return check_bounds(value, metadata) or f"is too large (at most about 1.8e308), not {shown(value)}"
        if not finite(value):
            return f"must be finite, not {value}"
    elif annotation is str:
        return None if isinstance(value, str) else f"must be a string, not {type_name(value)}"
    return check_bounds(value, metadata)


def check_bounds(value: float, metadata: dict) -> str | None:
    minimum, maximum = metadata.get("minimum"), metadata.get("maximum")
    if minimum is not None:
        if metadata.get("exclusive_minimum") and value <= minimum:
            return f"must be greater than {minimum}, not {shown(value)}"
        if value < minimum:
            return f"must be at least {minimum}, not {shown(value)}"
    if maximum is not None and value > maximum:
        return f"must be at most {maximum}, not {shown(value)}"
    return None


def shown(value: Any) -> str:
    """A value as a refusal quotes it (repr): an integer of hundreds of digits by its length, not the digits."""
    if isinstance(value, int) and not isinstance(value, bool) and not -10 ** 20 < value < 10 ** 20:
        try:
            digits = str(len(str(abs(value))))
        except ValueError:  # past int()'s limit on digits, which str() keeps too
            digits = "thousands of"
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    return repr(value)


def type_name(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)
