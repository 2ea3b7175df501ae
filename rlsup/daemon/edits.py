"""What a saved edit of a job file asks of its job (DESIGN.md section 5), as a value the loop carries out."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlsup import jobstate, lineage, own_files, spec as specs
from rlsup.jobstate import EditAction, State
from rlsup.store import Job


@dataclass(frozen=True)
class SavedFile:
    """A job file as saved, with the digest that says whether it was already judged."""

    path: Path
    text: str
    digest: str


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

    @property
    def summary(self) -> str:
        return "applied: " + "; ".join(str(change) for change in self.changes)

    @property
    def restart_reason(self) -> str:
        fields = ", ".join(change.field for change in self.changes if change.edit != specs.LIVE)
        return f"edit of {fields} applies by pause and resume"


Decision = Accept | Refuse | None  # None: nothing differs from the run's spec


def read_saved(job: Job) -> SavedFile | None:
    """The job's file when it differs from what was last judged; None when unreadable or unchanged."""
    path = Path(job.spec_path)
    try:
        data = own_files.read_regular(path)  # a FIFO under a shared run_root must not stall the daemon's loop
    except OSError:
        return None  # removed, or mid-rename by an editor: the job goes on with what it has
    digest = specs.file_digest(data)
    if digest == job.spec_seen:
        return None  # saved without a change, or already judged
    return SavedFile(path, data.decode("utf-8", errors="replace"), digest)


def unreadable_run_spec(error: specs.SpecError) -> Refuse:
    return Refuse(f"{error}\nthe job goes on with its current spec")


def decide(job: Job, current: specs.JobSpec, saved: SavedFile) -> Decision:
    """Judge a saved job file against the run's current spec, given the job's state (no I/O)."""
    try:
        edited = specs.apply_overrides(specs.loads(saved.text, file=str(saved.path), default_name=saved.path.stem),
                                       job.override_values)
    except specs.SpecError as error:
        return unreadable_run_spec(error)
    changes = specs.diff(current, edited)
    new_identity = bool(specs.refused(changes))
    if new_identity and not (job.state is State.QUEUED and job.started is None):
        # The refusal names the command that does what the edit asked: a fork from the newest checkpoint.
        advice = lineage.fork_advice(job.id, saved.path, current, edited)
        return Refuse(f"{specs.identity_message(str(saved.path), saved.text, changes)}\n{advice}")
    if not changes:
        return None
    # Nothing has been learned by a job never started: the file may still say what the run is.
    action = jobstate.edit_action(job.state, live_only=specs.only_live(changes),
                                  total_steps=edited.job.total_steps, step_reached=job.step)
    # A run keeps what its "auto" fields resolved to, unless the edit changes what they were resolved for.
    return Accept(edited if new_identity else specs.settle(current, edited), tuple(changes), action, new_identity)
