"""Loading job files: TOML checked field by field and rule by rule, every problem located at its line."""
from __future__ import annotations

import dataclasses
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

from rlsup import own_files
from rlsup.paths import NAME_LENGTH, sanitize_name
from rlsup.spec import toml_text
from rlsup.spec.values import check_value
from rlsup.spec.fields import (ARRAY_TABLES, TABLES, JobSpec, default_replays, field_types, former_names,
                               section_field)
from rlsup.spec.locating import Located, Problem, SpecError, suggestion
from rlsup.spec.rules import job_violations
from rlsup.spec.scheduler_table import SCHEDULER_TABLE, Settings, check_against, read_scheduler
from rlsup.spec.sweep import SWEEP_TABLE, Sweep, read_sweep

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class SpecDeprecation(FutureWarning):
    """A job file spells something the old way: it still loads, and the user is told where to change it.

    A FutureWarning, which Python shows by default (a DeprecationWarning would be hidden from users).
    """


# One warning registry per job file: a file loaded again (the daemon reloads edited files) warns once.
_WARNED: dict[str, dict] = {}


def load(path: str | Path, *, read: Callable[[Path], bytes] = own_files.read_regular,
         named_after_file: bool = True) -> JobSpec:
    """Read and validate a job file; raise SpecError naming file, line and field. read takes its bytes: by default
    through links, as a user's own job file may be one; a run's job.toml is read with own_files.read_small.
    Without named_after_file, a file with no [job] name is left unnamed (see loads)."""
    path = Path(path)
    try:
        text = read(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError([Problem(str(path), None, "", f"cannot read the file: {error}")]) from None
    return loads(text, file=str(path), default_name=path.stem if named_after_file else None)


def loads(text: str, *, file: str = "<string>", default_name: str | None = "job") -> JobSpec:
    """Parse job-file text; see load(). Old spellings load too, each with a SpecDeprecation warning.

    default_name names a file with no [job] name; None leaves its name "" (an edit of a job's file: judge() keeps
    the job's name, which a file's own name must not change: a copy's is source.toml)."""
    try:
        data = toml_text.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_from_message(str(error))
        if line is None and "end of document" in str(error):
            line = max(len(text.splitlines()), 1)
        message = getattr(error, "msg", None) or re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise SpecError([Problem(file, line, "", f"invalid TOML: {message}")]) from None
    located = _Loading(file, text)
    spec = located.build_spec(data)
    if spec is not None:
        if not spec.job.name and default_name is not None:
            spec = spec.replace("job", name=sanitize_name(default_name))
        located.problems.extend(located.problem(violation.path, violation.message)
                                for violation in job_violations(spec))
        if located.scheduler is not None:  # the fork rules are the run layer's: client.scheduler_of checks those
            located.problems.extend(check_against(located.scheduler, spec, located, fork_refuses=lambda name: None))
    if located.problems:
        raise SpecError(located.problems)
    located.warn_deprecations()
    return spec


def sweep_of(text: str, *, file: str = "<string>") -> Sweep:
    """The [sweep] table of job-file text that loads() accepts (an empty Sweep without one)."""
    table = toml_text.loads(text).get(SWEEP_TABLE, {})
    sweep, problems = read_sweep(table, Located(file, text))
    if problems:
        raise SpecError(problems)
    return sweep


def scheduler_of(text: str, spec: JobSpec, *, file: str = "<string>",
                 fork_refuses: Callable[[str], str | None]) -> Settings | None:
    """The [scheduler] table of job-file text that loads() accepts, checked against spec and the fork rules;
    None without one."""
    table = toml_text.loads(text).get(SCHEDULER_TABLE)
    if table is None:
        return None
    located = Located(file, text)
    settings, problems = read_scheduler(table, located)
    problems += check_against(settings, spec, located, fork_refuses) if settings is not None else []
    if problems:
        raise SpecError(problems)
    return settings


def _line_from_message(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


class _Loading(Located):
    """One file being loaded: the problems found so far and the old spellings it uses."""

    def __init__(self, file: str, text: str):
        super().__init__(file, text)
        self.problems: list[Problem] = []
        self.deprecations: list[Problem] = []
        self.scheduler: Settings | None = None  # the [scheduler] table as read, checked against the spec once built

    def build_spec(self, data: dict) -> JobSpec | None:
        sections: dict[str, Any] = {}
        known = list(TABLES) + list(ARRAY_TABLES)
        for key, value in data.items():
            if key in TABLES:
                if not isinstance(value, dict):
                    self.problems.append(self.problem((key,), f"must be a table [{key}]"))
                    continue
                sections[key] = self.build_section(TABLES[key], value, (key,))
            elif key in ARRAY_TABLES:
                if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                    self.problems.append(self.problem((key,), f"must be an array of tables [[{key}]]"))
                    continue
                if not value:
                    self.problems.append(self.problem((key,), "needs at least one entry"))
                    continue
                sections[key] = tuple(self.build_section(ARRAY_TABLES[key], item, (key, index))
                                      for index, item in enumerate(value))
            elif key == SWEEP_TABLE:
                self.problems.extend(read_sweep(value, self)[1])  # its values become jobs at submit: sweep_of()
            elif key == SCHEDULER_TABLE:
                self.scheduler, problems = read_scheduler(value, self)  # the experiment's: scheduler_of()
                self.problems.extend(problems)
            else:
                choices = known + [SWEEP_TABLE, SCHEDULER_TABLE]
                self.problems.append(self.problem((key,), "unknown table" + suggestion(key, choices)))
        if self.problems:
            return None
        spec = JobSpec(**sections)
        return spec if "replay" in sections else dataclasses.replace(spec, replay=default_replays(spec))

    def build_section(self, cls: type, data: dict, path: tuple) -> Any:
        hints = field_types(cls)
        values: dict[str, Any] = {}
        for name, (key, value) in self.current_names(cls, data, path).items():
            if name not in hints:
                self.problems.append(self.problem(path + (key,), "unknown field" + suggestion(key, list(hints))))
                continue
            error = check_value(value, hints[name], section_field(cls, name).metadata)
            if error:
                self.problems.append(self.problem(path + (key,), error))
            else:
                values[name] = float(value) if hints[name] is float else value
        return cls(**values)

    def current_names(self, cls: type, data: dict, path: tuple) -> dict[str, tuple[str, Any]]:
        """Field name -> (the key the file wrote, value): old spellings are noted, and an old and a new
        spelling of one field together is a problem."""
        renamed = {}
        formerly = former_names(cls)
        for key, value in data.items():
            name = formerly.get(key, key)
            if name != key:
                if name in data:
                    self.problems.append(self.problem(path + (key,), f"is the old spelling of {name}, which is "
                                                                     f"also given; keep only {name}"))
                    continue
                self.deprecations.append(self.problem(path + (key,), f"is the old spelling of {name}; rename it "
                                                                     "(the old one still loads, for now)"))
            renamed[name] = (key, value)
        return renamed

    def warn_deprecations(self) -> None:
        registry = _WARNED.setdefault(self.file, {})
        for note in self.deprecations:
            # Attributed to the job file's own line, so the warning shows that line, not this module's.
            warnings.warn_explicit(f"{note.field}: {note.message}", SpecDeprecation, self.file, note.line or 0,
                                   module="rlsup.spec", registry=registry)


def field_problem(section: str, name: str, value: Any) -> str | None:
    """Why value cannot be [section] name (type and range), or None: for values given outside a file."""
    cls = TABLES[section]
    return check_value(value, field_types(cls)[name], section_field(cls, name).metadata)


def numbered_name(name: str, number: int) -> str:
    """name-2, name-3…: another job's name when name is taken, cut so that the number is kept whole."""
    suffix = f"-{number}"
    return sanitize_name(name[:NAME_LENGTH - len(suffix)] + suffix)
