"""The command palette: the TUI's actions on the selected job or experiment, and "go to" every job and experiment."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from textual.command import DiscoveryHit, Hit, Hits, Provider

from rlsup.views import jobs as jobview
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.screens import MainScreen

if TYPE_CHECKING:
    # For the checker alone: the app lists this provider, whose commands are the app's own actions. A type-only
    # circle, kept (tests/unit/test_import_graph.py): a Protocol would copy the app's interface, unchecked.
    from rlsup.tui.app import RlsupApp

Command = tuple[str, str, Callable[[], object]]


class JobCommands(Provider):
    """The TUI's actions in the command palette, plus "go to" every job and experiment."""

    def commands(self) -> list[Command]:
        app: RlsupApp = self.app  # type: ignore[assignment]
        row = app.model.row(app.selected_job_id)
        subject = f"job {jobview.job_label(row.job)} ({row.job.name})" if row else "the selected job"
        # A group row under the cursor of the screen the palette was opened on: its intents reach all its jobs.
        experiment = app.selected_experiment(self.screen)
        group = f"every job of experiment {experiment}" if experiment else subject
        # Its jobs follow one job file (or one copy of it): editing the first job's edits them all.
        edited = f"the job file of experiment {experiment}" if experiment else subject
        return [
            (f"Pause {group}", "Write a checkpoint and stop", app.action_pause),
            (f"Resume {group}", "Continue from the newest checkpoint", app.action_resume),
            (f"Kill {group}", "Stop without a checkpoint (asks first)", app.action_kill),
            (f"Edit {edited}", "Open it in $EDITOR; the daemon applies or refuses the edit", app.action_edit),
            *self.group_commands(experiment),
            (f"Details of {subject}", "Fields, plots, checkpoints, events and log", app.action_details),
            ("Submit a job file", "Queue a TOML job file", app.action_submit),
            ("Start the daemon", "Needed for jobs to run", app.action_start_daemon),
            ("Keys", "Show every key", app.action_help),
        ]

    def group_commands(self, experiment: str | None) -> list[Command]:
        """On a group row: open or close it, and mark it for the plot (what enter and space do there)."""
        if experiment is None:
            return []
        return [(f"Open or close experiment {experiment}", "Show or hide its jobs under its row",
                 lambda: self.on_main_screen(lambda screen: screen.query_one(JobsTable).action_select_cursor())),
                (f"Mark or unmark experiment {experiment} for the plot", "Overlay its jobs' mean and band",
                 lambda: self.on_main_screen(MainScreen.action_toggle_mark))]

    def go_to_commands(self) -> list[Command]:
        app: RlsupApp = self.app  # type: ignore[assignment]
        jobs = [(f"Go to job {jobview.job_label(row.job)} {row.job.name}", f"{row.job.state}, {row.job.algo} on {row.job.env}",
                 lambda job_id=row.job.id: app.go_to_job(job_id)) for row in app.model.rows]
        experiments = dict.fromkeys(row.job.experiment for row in app.model.rows if row.job.experiment)
        return jobs + [(f"Go to experiment {name}", "Its group row, with its summary and variant table",
                        lambda name=name: app.go_to_experiment(name)) for name in experiments]

    def on_main_screen(self, action: Callable[[MainScreen], object]) -> None:
        # The palette may have been opened from the detail screen: group rows are on the main one.
        if isinstance(self.app.screen, MainScreen):
            action(self.app.screen)

    async def discover(self) -> Hits:
        for title, help_text, callback in self.commands():
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self.commands() + self.go_to_commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
