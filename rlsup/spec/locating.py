"""Errors that name file, line and field: tomllib gives values, not positions, so a light scan maps keys to lines."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job file, located as precisely as the file allows."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class SpecError(ValueError):
    """A job file that cannot be used; str() lists every problem as FILE:LINE: field: message."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


def suggestion(word: str, choices: list[str]) -> str:
    """ " (did you mean 'X'?)" for the choice closest to a word that names none, or "": every unknown name's."""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _split_dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.split(r"\.(?=(?:[^\"']|\"[^\"]*\"|'[^']*')*$)", text)]


def locate_keys(text: str) -> dict[tuple, int]:
    """Map key paths such as ("dqn", "lr") or ("replay", 0, "ratio") to 1-based line numbers."""
    lines: dict[tuple, int] = {}
    table: tuple = ()
    array_counts: dict[tuple, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            path = tuple(_split_dotted(header.group(2)))
            if header.group(1) == "[[":
                index = array_counts.get(path, -1) + 1
                array_counts[path] = index
                table = path + (index,)
            else:
                table = path
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault(table + tuple(_split_dotted(key.group(1))), number)
    return lines


def line_of(lines: dict[tuple, int], path: tuple) -> int | None:
    """The line of a key path from locate_keys, falling back to its enclosing table."""
    while path:
        if path in lines:
            return lines[path]
        path = path[:-1]
    return None


def dotted(path: tuple) -> str:
    """('replay', 0, 'capacity') -> 'replay[0].capacity', the field names of problems and changes."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def field_path(name: str) -> tuple:
    """'replay[0].capacity' -> ('replay', 0, 'capacity'), the key form of locate_keys; dotted's inverse."""
    parts: list = []
    for piece in name.split("."):
        match = re.fullmatch(r"(.+?)\[(\d+)\]", piece)
        parts.extend((match.group(1), int(match.group(2))) if match else (piece,))
    return tuple(parts)


class Located:
    """A job file's text with its key lines, making problems that name file, line and field."""

    def __init__(self, file: str, text: str):
        self.file = file
        self.lines = locate_keys(text)

    def line(self, path: tuple) -> int | None:
        return line_of(self.lines, path)

    def problem(self, path: tuple, message: str) -> Problem:
        return Problem(self.file, self.line(path), dotted(path), message)
