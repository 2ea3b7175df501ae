"""How numbers, sizes, times and durations read on screen: one module for the CLI, the TUI and the worker."""
from __future__ import annotations

import math
import sys
import time

MISSING = "–"  # no value yet: a speed before the first report, a time not reached
# Patterns for clock_time: a column shows what its width allows.
TIME_OF_DAY = "%H:%M:%S"
DATE_AND_TIME = "%Y-%m-%d %H:%M:%S"
DATE_AND_MINUTE = "%Y-%m-%d %H:%M"
DAY_AND_MINUTE = "%m-%d %H:%M"


class Sentence(Exception):
    """An error whose message is already the whole sentence a run ends with (an env's fault, a child killed by
    a signal): the worker says it as it is, without the exception's type or a note about a traceback."""


# Every integer is stored as a signed 64-bit number somewhere (SQLite, numpy, torch), so none may be wider.
INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1


def finite(value: object) -> bool:
    """Whether value is an int or float (not a bool) that a double holds finitely. TOML and JSON integers have no
    size limit, and math.isfinite raises OverflowError for one of hundreds of digits instead of answering."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) if isinstance(value, float) else -sys.float_info.max <= value <= sys.float_info.max


def number(value: object) -> float | None:
    """A finite int or float as a float; None for anything else (bools, strings, NaN, an integer of hundreds of
    digits): a value read from a run's JSON files (status.json, a manifest, metrics) is checked with it before
    anything shows or uses it."""
    return float(value) if finite(value) else None


def whole(value: object) -> int | None:
    """number() as a whole number within 64 bits (what the store and numpy hold), else None; an int exactly."""
    found = value if isinstance(value, int) and not isinstance(value, bool) else number(value)
    return int(found) if found is not None and INT64_MIN <= found <= INT64_MAX else None


def one_line(text: str) -> str:
    """text with every run of whitespace, line breaks included, made one space: a sentence for one line."""
    return " ".join(str(text).split())


def printable(text: str) -> str:
    """text that a terminal only shows: each character it would act on instead (an escape sequence's ESC, a line
    break, a bidi override that reorders the line, a lone surrogate) written as its Python escape, e.g. \\x1b.

    For what comes from a job's data (names, reasons, paths, log lines): a job file, or a run received from
    someone else, must not be able to recolour, rewrite or reorder what the user reads.
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(character if character.isprintable() else ascii(character)[1:-1] for character in text)


def printable_lines(text: str) -> str:
    """printable(), keeping line breaks: for the sentences of several lines a reason or an event can be."""
    return "\n".join(printable(line) for line in str(text).split("\n"))


def middle_cut(text: str, width: int) -> str:
    """text in width characters, a third of them its start and two thirds its end with "…" between when it
    is longer: a sweep's variants differ towards their end ("cp-sweep-lr0.001-seed3"), so cutting the end made
    them all "cp-sweep-…"; the start still names the experiment."""
    if len(text) <= width:
        return text
    if width < 2:
        return text[:width]
    head = (width - 1) // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def counted(count: int, noun: str) -> str:
    """1 episode, 2 episodes, 1,000 episodes: a count with its noun, singular for one ("over 1 episodes")."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def short_count(value: float | None) -> str:
    """12_345 -> 12.3k, 2_000_000 -> 2M: a step count that fits a narrow column."""
    if value is None:
        return MISSING
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit * 0.9995:  # 999,999 rounds to "1M", not "1e+03k"
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


# Beyond this magnitude a value reads in three significant digits: a run's status.json is anyone's to write,
# and 1e308 written out in full made a table cell 310 characters wide.
PLAIN_MAX = 1e12


def speed(value: float | None, missing: str = MISSING) -> str:
    """Steps per second as a whole number with thousands separators; missing before the first report."""
    if value and abs(value) >= PLAIN_MAX:
        return f"{value:.3g}"
    return f"{value:,.0f}" if value else missing


def decimal(value: float | None, places: int, missing: str = MISSING) -> str:
    """A value such as a mean return to a fixed number of places; missing when there is none yet."""
    if not isinstance(value, (int, float)):
        return missing
    return f"{value:.3g}" if abs(value) >= PLAIN_MAX else f"{value:.{places}f}"


def duration(seconds: float | None) -> str:
    """A compact duration for a table cell: 5s, 1m05s, 1h01m, 1d01h."""
    if seconds is None:
        return MISSING
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def stopwatch(seconds: float) -> str:
    """A duration as hours:minutes:seconds, for a line redrawn in place whose width must not jump."""
    hours, remainder = divmod(int(seconds), 3600)
    return f"{hours}:{remainder // 60:02d}:{remainder % 60:02d}"


GIB = 1 << 30  # a gibibyte: GPU memory is declared ([job] gpu_memory_gb) and shown in it


def gibibytes(count: float) -> str:
    """Bytes as GiB to one decimal, without a unit or a ".0", as a packing shows them side by side ("3.1/80")."""
    return f"{count / GIB:.1f}".removesuffix(".0")


def byte_size(count: float | None) -> str:
    """A size in binary units (KiB, MiB, GiB, TiB), as memory and files are measured."""
    if count is None:
        return MISSING
    for limit, suffix in ((1 << 40, "TiB"), (GIB, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if count >= limit:
            return f"{count / limit:.1f} {suffix}"
    return f"{count:.0f} B"


def clock_time(stamp: float | None, pattern: str = TIME_OF_DAY) -> str:
    """A Unix time as local time, or MISSING for none (a job not started yet) and for one no calendar holds
    (a received run's 1e308: localtime raises OverflowError, OSError or ValueError)."""
    try:
        return time.strftime(pattern, time.localtime(stamp)) if stamp else MISSING
    except (OverflowError, OSError, ValueError):
        return MISSING
