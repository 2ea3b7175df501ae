"""Every message the TUI's poller and action workers post to the UI thread."""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from rlsup.checkpoint.manifest import CheckpointEntry
    from rlsup.tui.experiment import ExperimentFigures
    from rlsup.hardware import Sample
    from rlsup.views.jobs import JobRow
    from rlsup.jobs.store import Event
    from rlsup.tui.metrics import MetricsView


class DaemonChanged(Message):
    """The daemon started or stopped (also posted once at start-up)."""

    def __init__(self, running: bool, pid: int | None) -> None:
        super().__init__()
        self.running = running
        self.pid = pid


class JobsRefreshed(Message):
    """Every job as it is now, already sorted; the table redraws only the cells that differ."""

    def __init__(self, rows: tuple[JobRow, ...]) -> None:
        super().__init__()
        self.rows = rows


class EventsAppended(Message):
    """Events of any job recorded since the previous poll, oldest first."""

    def __init__(self, events: tuple[Event, ...]) -> None:
        super().__init__()
        self.events = events


class JobEventsLoaded(Message):
    """The recent history of a newly selected job, replacing what the events pane shows."""

    def __init__(self, job_id: int, events: tuple[Event, ...]) -> None:
        super().__init__()
        self.job_id = job_id
        self.events = events


class MetricsUpdated(Message):
    """New downsampled plot data for the selected job."""

    def __init__(self, job_id: int, view: MetricsView) -> None:
        super().__init__()
        self.job_id = job_id
        self.view = view


class ExperimentEvaluated(Message):
    """The variant table of the experiment whose group row is under the cursor, read from its runs' metrics, and
    what its scheduler decided."""

    def __init__(self, experiment: str, results: ExperimentFigures) -> None:
        super().__init__()
        self.experiment = experiment
        self.results = results


class CheckpointsListed(Message):
    """The checkpoints of the selected job changed (or the selection did)."""

    def __init__(self, job_id: int, entries: tuple[CheckpointEntry, ...]) -> None:
        super().__init__()
        self.job_id = job_id
        self.entries = entries


class CheckpointVerified(Message):
    """A background verification finished: problem is None when every file checks out."""

    def __init__(self, path: str, problem: str | None) -> None:
        super().__init__()
        self.path = path
        self.problem = problem


class LogTail(Message):
    """The last lines of the selected job's worker.log."""

    def __init__(self, job_id: int, lines: tuple[str, ...]) -> None:
        super().__init__()
        self.job_id = job_id
        self.lines = lines


class HardwareSampled(Message):
    """A reading of the machine, with the jobs holding each GPU index, and whose it is (widgets.READ_BY)."""

    def __init__(self, sample: Sample, holders: dict[int, str], read_by: str = "tui") -> None:
        super().__init__()
        self.sample = sample
        self.holders = holders
        self.read_by = read_by


class PollFailed(Message):
    """A poll could not read the store or a run file; the next poll tries again."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class ActionFinished(Message):
    """A pause / resume / kill / submit / daemon start done in a worker thread, for a notification."""

    def __init__(self, text: str, *, failed: bool = False) -> None:
        super().__init__()
        self.text = text
        self.failed = failed
