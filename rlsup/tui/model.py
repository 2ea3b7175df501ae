"""What the TUI last heard from its poller, kept so that a screen opened later shows it at once."""
from __future__ import annotations

from dataclasses import dataclass, field

from rlsup.views.jobs import JobRow
from rlsup.jobs.store import Event
from rlsup.tui.metrics import MetricsView
from rlsup.tui.experiment import ExperimentFigures, experiment_group
from rlsup.tui.screens import JobView


@dataclass
class Model:
    """The newest data the poller sent, kept so a screen opened later shows it at once."""

    daemon_running: bool | None = None
    rows: tuple[JobRow, ...] = ()
    hardware: tuple | None = None
    metrics: MetricsView | None = None
    checkpoints: tuple = ()
    verified: dict[str, str | None] = field(default_factory=dict)
    events_job: int | None = None
    events: list[Event] = field(default_factory=list)
    log: tuple[str, ...] = ()
    experiment: str | None = None  # whose group row is under the cursor: the experiment pane shows it
    evaluations: ExperimentFigures | None = None  # its variant table and scheduler lines, once read

    def forget_selection(self, job_id: int | None) -> None:
        self.metrics, self.checkpoints, self.log = None, (), ()
        self.events_job, self.events = job_id, []

    def replay(self, view: JobView) -> None:
        if self.daemon_running is not None:
            view.show_daemon(self.daemon_running)
        view.show_jobs(self.rows)
        if self.hardware is not None:
            view.show_hardware(*self.hardware)
        view.show_metrics(self.metrics)
        view.show_checkpoints(self.checkpoints, self.verified)
        view.load_events(self.events_job, tuple(self.events))
        view.show_log(self.log)
        view.show_experiment(experiment_group(self.rows, self.experiment), self.evaluations)

    def row(self, job_id: int | None) -> JobRow | None:
        return next((row for row in self.rows if row.job.id == job_id), None)
