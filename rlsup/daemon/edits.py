"""What a saved edit of a job file asks of its job (DESIGN.md section 5), as a value the loop carries out."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from rlsup import own_files, spec as specs
from rlsup.jobs import state as jobstate
from rlsup.run import lineage
from rlsup.jobs.state import EditAction, State
from rlsup.jobs.store import Job


@dataclass(frozen=True)
class SavedFile:
    """A job file as saved, with the digest that says whether it was already judged."""

    path: Path
    text: str
    digest: str


@dataclass(frozen=True)
class ParsedFile:
    """A saved job file parsed once for every job it drives: its spec, or why it does not load."""

    saved: SavedFile
    spec: specs.JobSpec | None
    error: specs.SpecError | None


@dataclass(frozen=True)
class Refuse:
    """The job goes on with its current spec; message says why, with file:line where known."""

    message: str


@dataclass(frozen=True)
class Accept:
    """The edited spec becomes the run's job.toml, and action says what else it needs."""

    spec: specs.JobSpec
    changes: tuple[specs.Change, ...]
    action: EditAction
    new_identity: bool = False  # a job that never started takes identity edits too: algo and env change
    refused: tuple[str, ...] = ()  # the same save's identity fields, not applied
    refusal: str = ""              # and why: an event of its own, with file:line and the fork to run instead
    note: str = ""                 # what else of the edit was not applied, and why (keep_name)

    @property
    def summary(self) -> str:
        applied = "applied: " + "; ".join(str(change) for change in self.changes) + (f"; {self.note}" if self.note else "")
        return f"{applied}\nnot applied, refused from the same save: {', '.join(self.refused)}" if self.refused \
            else applied

    @property
    def restart_reason(self) -> str:
        fields = ", ".join(change.field for change in self.changes if change.edit != specs.LIVE)
        return f"edit of {fields} applies by pause and resume"


Decision = Accept | Refuse | None  # None: nothing differs from the run's spec


def read_saved(path: Path) -> SavedFile | None:
    """A job file as saved now; None when unreadable."""
    try:
        data = own_files.read_regular(path)  # a FIFO under a shared run_root must not stall the daemon's loop
    except OSError:
        return None  # removed, or mid-rename by an editor: its jobs go on with what they have
    return SavedFile(path, data.decode("utf-8", errors="replace"), specs.file_digest(data))


def parse(saved: SavedFile) -> ParsedFile:
    """Parse the saved file once: every job it drives is judged against this (each with its own overrides)."""
    try:
        return ParsedFile(saved, specs.loads(saved.text, file=str(saved.path), default_name=None), None)
    except specs.SpecError as error:
        return ParsedFile(saved, None, error)


def unreadable_run_spec(error: specs.SpecError) -> Refuse:
    return Refuse(f"{error}\nthe job goes on with its current spec")


def decide(job: Job, current: specs.JobSpec, parsed: ParsedFile) -> Decision:
    """Judge a saved job file against the run's current spec, given the job's state (no I/O).

    A started run refuses the save's identity fields and takes the others, and says both: refusing the whole
    save left a run ending at its old budget while its file showed the new one, with an event naming only the
    refused field."""
    if parsed.error is not None:
        return unreadable_run_spec(parsed.error)
    try:
        edited = specs.apply_overrides(parsed.spec, job.override_values)
    except specs.SpecError as error:
        return unreadable_run_spec(error)
    judged = specs.judge(current, edited, started=not (job.state is State.QUEUED and job.started is None))
    if not judged.changes:
        return None
    refusal = refusal_of(job, current, edited, parsed.saved, judged) if judged.refused else ""
    if not judged.applied:
        return Refuse(refusal)
    action = jobstate.edit_action(job.state, live_only=specs.only_live(judged.applied),
                                  total_steps=judged.spec.job.total_steps, step_reached=job.step)
    return Accept(judged.spec, judged.applied, action, judged.new_identity,
                  refused=tuple(change.field for change in judged.refused), refusal=refusal)


def refusal_of(job: Job, current: specs.JobSpec, edited: specs.JobSpec, saved: SavedFile,
               judged: specs.Judgement) -> str:
    """The refused fields at their lines in the saved file, what was applied, and the command that does what the
    edit asked: a fork from the newest checkpoint."""
    located = specs.identity_message(str(saved.path), saved.text, judged.changes, applied=judged.applied)
    return f"{located}\n{lineage.fork_advice(job.id, saved.path, current, edited)}"


def keep_name(decision: Decision, current: specs.JobSpec, path: Path, holder: int | None) -> Decision:
    """An edit whose new name job holder already holds keeps the job's name, and says so: a name finds one job
    (issue 24), and the rest of the edit applies as it would have."""
    if holder is None or not isinstance(decision, Accept):
        return decision
    note = (f"{path}: job.name {decision.spec.job.name!r} is job {holder}'s name, and a name finds one job: "
            f"this job keeps {current.job.name!r}")
    changes = tuple(change for change in decision.changes if change.field != "job.name")
    if not changes:
        return Refuse(note)
    return dataclasses.replace(decision, spec=decision.spec.replace("job", name=current.job.name), changes=changes,
                               note=note)
