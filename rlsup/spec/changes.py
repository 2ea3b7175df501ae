"""Diffs between the spec a run has and an edited file, and the one judge() of what the run takes of them."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Iterable

from rlsup.spec.fields import IDENTITY, LIVE, JobSpec
from rlsup.spec.locating import field_path, line_of, locate_keys


@dataclass(frozen=True)
class Change:
    """One field that differs between two specs."""

    field: str
    old: Any
    new: Any
    edit: str

    def __str__(self) -> str:
        return f"{self.field}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    """A value as the job file spells it (true, not Python's True), or how many tables an array of them holds."""
    if isinstance(value, tuple):
        return f"{len(value)} tables"
    return json.dumps(value) if isinstance(value, (str, list, bool)) else repr(value)


def diff(old: JobSpec, new: JobSpec) -> list[Change]:
    """Every field that differs, with its edit class."""
    changes: list[Change] = []
    for section in dataclasses.fields(JobSpec):
        old_value, new_value = getattr(old, section.name), getattr(new, section.name)
        if isinstance(old_value, tuple):
            changes.extend(_diff_tables(section.name, old_value, new_value))
        else:
            changes.extend(_diff_section(section.name, old_value, new_value))
    return changes


def _diff_tables(name: str, old: tuple, new: tuple) -> list[Change]:
    if len(old) != len(new):
        return [Change(name, old, new, IDENTITY)]
    changes = []
    for index, (old_item, new_item) in enumerate(zip(old, new)):
        changes.extend(_diff_section(f"{name}[{index}]", old_item, new_item))
    return changes


def _diff_section(prefix: str, old: Any, new: Any) -> list[Change]:
    return [Change(f"{prefix}.{f.name}", getattr(old, f.name), getattr(new, f.name), f.metadata["edit"])
            for f in dataclasses.fields(old) if getattr(old, f.name) != getattr(new, f.name)
            and not _still_auto(f, getattr(new, f.name))]


def _still_auto(field: dataclasses.Field, new: Any) -> bool:
    """A file saying "auto" where the run recorded what auto resolved to asks for nothing new."""
    return field.metadata.get("resolved", False) and new == "auto"


def settle(current: JobSpec, edited: JobSpec) -> JobSpec:
    """edited, with every resolved field it leaves at "auto" taken from current: what the run records."""
    sections = {}
    for section in dataclasses.fields(JobSpec):
        old, new = getattr(current, section.name), getattr(edited, section.name)
        if isinstance(old, tuple):
            continue
        kept = {f.name: getattr(old, f.name) for f in dataclasses.fields(old) if _still_auto(f, getattr(new, f.name))}
        sections[section.name] = dataclasses.replace(new, **kept)
    return dataclasses.replace(edited, **sections)


def refused(changes: Iterable[Change]) -> list[Change]:
    """The identity changes, which no resume may apply."""
    return [change for change in changes if change.edit == IDENTITY]


@dataclass(frozen=True)
class Judgement:
    """What an edited spec asks of a run, by each field's edit class; the caller decides what to do with a refusal."""

    changes: tuple[Change, ...]  # every field that differs
    refused: tuple[Change, ...]  # the identity changes a started run may not take
    applied: tuple[Change, ...]  # what the run takes: every change but the refused
    spec: JobSpec                # what the run records: edited, but for the refused fields and its resolved "auto"s

    @property
    def new_identity(self) -> bool:
        """Identity fields taken: only a run never started, which has learned nothing yet, takes them."""
        return bool(refused(self.applied))


def judge(current: JobSpec, edited: JobSpec, *, started: bool = True) -> Judgement:
    """The one judgement of an edited spec (overrides applied) against the run's current one.

    For the daemon's edits, `rlsup run --resume` and the client's drift column alike; the worker only applies
    the live fields of the spec this judgement wrote. An edited file that names no job (loaded unnamed) keeps the
    run's name: a name changes only by the [job] name field, never by the file's own name."""
    if not edited.job.name:
        edited = edited.replace("job", name=current.job.name)
    changes = tuple(diff(current, edited))
    identity = tuple(refused(changes))
    if identity and not started:
        # A run keeps what its "auto" fields resolved to, unless the edit changes what they were resolved for.
        return Judgement(changes, (), changes, edited)
    if identity:
        applicable = without_identity(current, edited)
        return Judgement(changes, identity, tuple(diff(current, applicable)), settle(current, applicable))
    return Judgement(changes, (), changes, settle(current, edited))


def refusal_message(changes: list[Change], file: str | None = None, text: str | None = None) -> str:
    """[FILE[:LINE]: ]field: old -> new for each refused field, then what to do instead.

    The one wording of a refused edit, for `rlsup run --resume` and the daemon's watcher alike; given
    the edited file's name and text, each field is located at its line.
    """
    lines = locate_keys(text) if text is not None else {}
    located = []
    for change in refused(changes):
        line = line_of(lines, field_path(change.field))
        where = f"{file}:{line}: " if file and line else (f"{file}: " if file else "")
        located.append(f"{where}{change}: defines what the run learns, refused")
    return "\n".join(located) + "\nstart a new run to use them"


def identity_message(file: str, text: str, changes: list[Change], applied: list[Change] = ()) -> str:
    """refusal_message for an edit of a running job's file: it goes on as it was, but for the fields applied."""
    if not applied:
        return refusal_message(changes, file, text) + "; the job goes on with its current spec"
    return (refusal_message(changes, file, text) + "; the rest of this save is applied: "
            + "; ".join(str(change) for change in applied))


def without_identity(current: JobSpec, edited: JobSpec) -> JobSpec:
    """edited with every identity field as current has it: the part of an edit a started run may take."""
    sections = {}
    for section in dataclasses.fields(JobSpec):
        old, new = getattr(current, section.name), getattr(edited, section.name)
        if isinstance(old, tuple):
            sections[section.name] = old  # array tables hold identity fields only
            continue
        kept = {f.name: getattr(old, f.name) for f in dataclasses.fields(old) if f.metadata["edit"] == IDENTITY}
        sections[section.name] = dataclasses.replace(new, **kept)
    return dataclasses.replace(edited, **sections)


def only_live(changes: list[Change]) -> bool:
    return all(change.edit == LIVE for change in changes)


def merge_live(current: JobSpec, edited: JobSpec) -> JobSpec:
    """current with every live field taken from edited: what a running worker applies on SIGHUP."""
    sections = {}
    for section in dataclasses.fields(JobSpec):
        old, new = getattr(current, section.name), getattr(edited, section.name)
        if isinstance(old, tuple):
            continue  # array tables hold identity fields only
        live = {f.name: getattr(new, f.name) for f in dataclasses.fields(old) if f.metadata["edit"] == LIVE}
        sections[section.name] = dataclasses.replace(old, **live)
    return dataclasses.replace(current, **sections)
