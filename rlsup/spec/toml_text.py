"""TOML text parsed, an integer too long for int() refused at its line as invalid TOML, as any other fault is."""
from __future__ import annotations

import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DIGIT_RUN = re.compile(r"[0-9][0-9_]*")


class NumberTooLong(tomllib.TOMLDecodeError):
    """An integer of more digits than int() converts (sys.get_int_max_str_digits: 4,300 by default)."""

    def __init__(self, line: int | None):
        self.msg = f"an integer of more than {sys.get_int_max_str_digits()} digits"
        self.lineno = line
        # Not TOMLDecodeError's own __init__: its arguments differ between Python versions.
        ValueError.__init__(self, self.msg + (f" (at line {line})" if line else ""))


def loads(text: str) -> dict:
    """tomllib.loads(text); raises TOMLDecodeError (NumberTooLong is one) for text that is not TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        raise
    except ValueError:
        # The parser hands each integer to int(), whose ValueError for too many digits it lets through.
        raise NumberTooLong(line_of_long_number(text)) from None


def line_of_long_number(text: str) -> int | None:
    """The first line holding a run of more digits than int() converts; None if none does."""
    limit = sys.get_int_max_str_digits()
    for number, line in enumerate(text.splitlines(), 1):
        if any(len(run.replace("_", "")) > limit for run in DIGIT_RUN.findall(line)):
            return number
    return None
