"""Markdown pieces the generated pages share: tables, code spans, and numbers and TOML values as a reader reads them."""
from __future__ import annotations

import json
import re
from typing import Any, Iterable


def table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A Markdown table; each cell's text made safe for one cell (pipes escaped, lines joined)."""
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(value: Any) -> str:
    """Text made one cell: lines joined, a pipe escaped, but not in a code span, where the table reads it as
    text and an escape would show."""
    text = " ".join(("" if value is None else str(value)).split())
    pieces, end = [], 0
    for span in CODE_SPAN.finditer(text):
        pieces += [text[end:span.start()].replace("|", "\\|"), span[0]]
        end = span.end()
    return "".join(pieces + [text[end:].replace("|", "\\|")]) or "—"


CODE_SPAN = re.compile(r"(`+).+?\1")


def code(text: Any) -> str:
    """A code span of text; one that holds a backtick is fenced by two and padded, as CommonMark reads it."""
    text = str(text)
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def number(value: float | int) -> str:
    """A bound as a reader takes it in: 2^53 rather than 9007199254740992, 100_000 as TOML may spell it."""
    if isinstance(value, float) and not value.is_integer():
        return repr(value)
    whole = int(value)
    sign, size = ("−" if whole < 0 else ""), abs(whole)
    if size >= 2 ** 16 and size & (size - 1) == 0:
        return f"{sign}2^{size.bit_length() - 1}"
    if size >= 2 ** 16 and (size + 1) & size == 0:
        return f"{sign}2^{size.bit_length()} − 1"
    text = f"{size:_}" if size >= 10_000 else str(size)
    return sign + text + (".0" if isinstance(value, float) and size < 10_000 else "")


def toml_value(value: Any) -> str:
    """A default as a job file spells it: true, "auto", [256, 256], 100_000."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:_}"
    return repr(value)


def bounds(minimum=None, maximum=None, *, exclusive_minimum=None, exclusive_maximum=None) -> str:
    """A range in words: "1 to 2^53", "above 0, at most 1", "at least 0"; "any" without bounds."""
    if minimum is not None and maximum is not None:
        return f"{number(minimum)} to {number(maximum)}"
    low = (f"above {number(exclusive_minimum)}" if exclusive_minimum is not None
           else f"at least {number(minimum)}" if minimum is not None else "")
    high = (f"below {number(exclusive_maximum)}" if exclusive_maximum is not None
            else f"at most {number(maximum)}" if maximum is not None else "")
    return ", ".join(bound for bound in (low, high) if bound) or "any"
