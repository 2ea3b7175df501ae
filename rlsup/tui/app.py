"""The rlsup TUI application: wiring the poller's messages to the screens, and the job actions."""
from __future__ import annotations

import os
import shlex
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Callable, Iterator

from textual import work
from textual.app import App, SuspendNotSupported
from textual.markup import escape
from textual.screen import Screen
from textual.worker import get_current_worker

from rlsup import client, paths, spec as specs
from rlsup.views import jobs as jobview
from rlsup.views import plots as plotting
from rlsup.checkpoint.manifest import verify
from rlsup.formatting import printable
from rlsup.jobs.record import EventKind, jobs_following
from rlsup.jobs.state import ACTIVE, Desired
from rlsup.views.jobs import JobRow
from rlsup.tui import data, messages, overlay
from rlsup.tui.commands import JobCommands
from rlsup.tui.experiment import experiment_group, experiment_jobs
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.model import Model
from rlsup.tui.screens import ConfirmScreen, DetailScreen, HelpScreen, JobView, MainScreen, SubmitScreen
from rlsup.tui.stop_signals import StopRequest, stop_signals_close

POLL_INTERVAL_S = 0.5
VERIFY_LOCK = threading.Lock()
EVENTS_KEPT = 1000


class RlsupApp(App):
    """Live jobs, metrics, checkpoints, events and hardware; pause, resume, kill, edit and submit."""

    CSS_PATH = "app.tcss"
    TITLE = "rlsup"
    COMMANDS = App.COMMANDS | {JobCommands}

    def __init__(self, home: Path | None = None, *, hardware=None, poll_interval_s: float | None = POLL_INTERVAL_S,
                 daemon_status: Callable = client.daemon_status):
        """poll_interval_s=None polls only on demand, on the UI thread: deterministic snapshots."""
        super().__init__()
        self.home = Path(home) if home is not None else paths.rlsup_home()
        self.poller = data.Poller(self.home, hardware, daemon_status=daemon_status)
        self.metrics_poller = data.MetricsPoller(self.home)
        self.poll_interval_s = poll_interval_s
        self.wake, self.metrics_wake = threading.Event(), threading.Event()
        self.stopping = False
        self.stop_request: StopRequest | None = None
        self.model = Model()
        self.selected_job_id: int | None = None
        self.marks = overlay.Marks()
        self.verifying: set[str] = set()
        self.poll_error: str | None = None

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def on_mount(self) -> None:
        self.sub_title = str(self.home) if self.poll_interval_s is not None else ""
        if self.poll_interval_s is None:
            self.poll_now()
        else:
            self.poll_forever(self.poller, self.wake)
            self.poll_forever(self.metrics_poller, self.metrics_wake)

    def on_ready(self) -> None:
        if self.stop_request is not None:
            self.stop_request.app_ready()

    # -- polling -----------------------------------------------------------------------------

    @work(thread=True, group="poll")
    def poll_forever(self, poller, wake: threading.Event) -> None:
        worker = get_current_worker()
        data.poll_until_cancelled(poller, self.post_message, interval_s=self.poll_interval_s, wake=wake,
                                  cancelled=lambda: worker.is_cancelled or self.stopping)

    def poll_now(self) -> None:
        for message in self.poller.poll() + self.metrics_poller.poll():
            self.post_message(message)

    def request_poll(self) -> None:
        if self.poll_interval_s is None:
            self.poll_now()
        else:
            self.wake.set()
            self.metrics_wake.set()

    def exit(self, *arguments, **options) -> None:
        # The pollers sleep on their wake events between polls: stop them now, not an interval later.
        self.stopping = True
        self.wake.set()
        self.metrics_wake.set()
        super().exit(*arguments, **options)

    def views(self) -> Iterator[JobView]:
        return (screen for screen in self.screen_stack if isinstance(screen, JobView) and screen.mounted)

    # -- what the poller sends ---------------------------------------------------------------

    def on_daemon_changed(self, message: messages.DaemonChanged) -> None:
        self.model.daemon_running = message.running
        for view in self.views():
            view.show_daemon(message.running)
        self.refresh_bindings()

    def on_jobs_refreshed(self, message: messages.JobsRefreshed) -> None:
        self.model.rows = message.rows
        self.metrics_poller.show_experiment(self.model.experiment, self.experiment_jobs(), selected=False)
        for view in self.views():
            view.show_jobs(message.rows)
        if self.model.experiment is not None:
            self.show_experiment()  # its counts, returns and ETA as they are now

    def on_events_appended(self, message: messages.EventsAppended) -> None:
        for event in message.events:
            if event.kind is EventKind.REFUSED and event.job_id != self.selected_job_id:
                self.notify(f"job {event.job_id}: {event.message}", title="Edit refused", severity="error")
        newest = self.model.events[-1].id if self.model.events else 0
        selected = [event for event in message.events if event.job_id == self.model.events_job and event.id > newest]
        self.model.events = (self.model.events + selected)[-EVENTS_KEPT:]
        for view in self.views():
            view.append_events(message.events)

    def on_job_events_loaded(self, message: messages.JobEventsLoaded) -> None:
        if message.job_id == self.selected_job_id:
            self.model.events_job, self.model.events = message.job_id, list(message.events)
            for view in self.views():
                view.load_events(message.job_id, message.events)

    def on_metrics_updated(self, message: messages.MetricsUpdated) -> None:
        if message.job_id == self.selected_job_id:
            self.model.metrics = message.view
            for view in self.views():
                view.show_metrics(message.view)

    def on_checkpoints_listed(self, message: messages.CheckpointsListed) -> None:
        if message.job_id != self.selected_job_id:
            return
        self.model.checkpoints = message.entries
        for view in self.views():
            view.show_checkpoints(message.entries, self.model.verified)
        for entry in message.entries:
            path = str(entry.path)
            if path not in self.model.verified and path not in self.verifying:
                self.verifying.add(path)
                self.verify_checkpoint(path)

    @work(thread=True, group="verify")
    def verify_checkpoint(self, path: str) -> None:
        # One at a time: checkpoints can be gigabytes, and two read at once only thrash the disk.
        with VERIFY_LOCK:
            problem = verify(Path(path))
        self.post_message(messages.CheckpointVerified(path, problem))

    def on_checkpoint_verified(self, message: messages.CheckpointVerified) -> None:
        self.verifying.discard(message.path)
        self.model.verified[message.path] = message.problem
        for view in self.views():
            view.mark_checkpoint(message.path, self.model.verified)

    def on_log_tail(self, message: messages.LogTail) -> None:
        if message.job_id == self.selected_job_id:
            self.model.log = message.lines
            for view in self.views():
                view.show_log(message.lines)

    def on_hardware_sampled(self, message: messages.HardwareSampled) -> None:
        self.model.hardware = (message.sample, message.holders, message.read_by)
        for view in self.views():
            view.show_hardware(*self.model.hardware)

    def on_poll_failed(self, message: messages.PollFailed) -> None:
        if message.error != self.poll_error:
            self.notify(message.error, title="Could not read the store", severity="warning")
        self.poll_error = message.error

    def on_action_finished(self, message: messages.ActionFinished) -> None:
        self.notify(message.text, severity="error" if message.failed else "information",
                    timeout=12 if message.failed else 4)
        self.request_poll()

    # -- selection ---------------------------------------------------------------------------

    def select_job(self, job_id: int | None) -> None:
        """Called by the main screen for the row under the jobs table's cursor (None: no row shown); to select
        a job elsewhere, move the cursor (go_to_job): each redraw of the table selects the cursor's row."""
        if job_id == self.selected_job_id:
            return
        self.selected_job_id = job_id
        self.poller.select(job_id)
        row = self.model.row(job_id)
        self.metrics_poller.select(job_id, row.job.run_dir if row else None)
        self.compare_marked()
        self.model.forget_selection(job_id)
        for view in self.views():
            self.model.replay(view)
        self.request_poll()

    # -- the experiment pane, while a group row is under the cursor --------------------------------

    def select_experiment(self, experiment: str | None) -> None:
        """The cursor came to a group row (its experiment) or to a job row (None)."""
        if experiment == self.model.experiment:
            return
        self.model.experiment, self.model.evaluations = experiment, None
        self.metrics_poller.show_experiment(experiment, self.experiment_jobs(), selected=True)
        self.show_experiment()
        self.request_poll()

    def experiment_jobs(self) -> tuple:
        return experiment_jobs(self.model.rows, self.model.experiment)

    def on_experiment_evaluated(self, message: messages.ExperimentEvaluated) -> None:
        if message.experiment == self.model.experiment:
            self.model.evaluations = message.results
            self.show_experiment()

    def show_experiment(self) -> None:
        group = experiment_group(self.model.rows, self.model.experiment)
        for view in self.views():
            view.show_experiment(group, self.model.evaluations)

    # -- curves side by side -----------------------------------------------------------------

    def toggle_mark(self, *curves: overlay.Curve) -> None:
        """Mark a row's curves (a job's, or a group's per variant) for the plot to overlay, or unmark them."""
        self.marks.toggle(*curves)
        self.compare_marked()
        self.request_poll()

    def show_marks_passing(self, passing_filter: frozenset[str]) -> None:
        """The jobs table's filter passes these row keys: overlay only the marked rows among them."""
        if self.marks.show_only(passing_filter):
            self.compare_marked()
            self.request_poll()

    def compare_marked(self) -> None:
        """Hand the metrics poller the marked curves and the selected job's; mark their rows."""
        row = self.model.row(self.selected_job_id)
        self.metrics_poller.compare(self.marks.compared(overlay.job_curve(row) if row else None))
        for view in self.views():
            view.show_marks(self.marks.keys())

    def action_next_smoothing(self) -> None:
        self.metrics_poller.smooth(plotting.next_smoothing(self.metrics_poller.request.smoothing))
        self.request_poll()

    def go_to_job(self, job_id: int) -> None:
        while not isinstance(self.screen, MainScreen):
            self.pop_screen()
        self.screen.go_to(job_id)

    def go_to_experiment(self, experiment: str) -> None:
        while not isinstance(self.screen, MainScreen):
            self.pop_screen()
        self.screen.go_to_experiment(experiment)

    def selected_row(self) -> JobRow | None:
        row = self.model.row(self.selected_job_id)
        if row is None:
            self.notify("No job selected.", severity="warning")
        return row

    def managed_row(self, action: str) -> JobRow | None:
        """The selected job if the daemon manages it; for a foreground run, says what to do instead."""
        row = self.selected_row()
        if row is None or not row.foreground:
            return row
        advice = jobview.foreground_advice(jobview.pid_of(row.job), row.job.run_dir, action)
        self.notify(f"{escape(printable(row.job.name))} is {escape(advice)}.", title="Foreground run",
                    severity="warning", timeout=12)
        return None

    # -- actions -----------------------------------------------------------------------------

    def action_pause(self) -> None:
        self.intent(Desired.PAUSED)

    def action_resume(self) -> None:
        self.intent(Desired.RUNNING)

    def action_kill(self) -> None:
        self.intent(Desired.KILLED)

    def intent(self, desired: Desired) -> None:
        experiment = self.selected_experiment()
        if experiment is not None:
            self.group_intent(experiment, desired)
            return
        row = self.managed_row(desired.verb)
        if row is None:
            return
        job = row.job
        refusal = client.intent_refusal(job, desired)  # asked first: a kill of a killed job asks no question
        if refusal is not None:
            self.notify(escape(printable(refusal)), severity="warning")
            return
        if desired is not Desired.KILLED:
            self.send_intent(desired, job.id)
            return
        # Static reads markup: a name from a store older than name sanitising is shown as text, never as markup.
        question = f"Kill job {job.id} ({escape(printable(job.name))})? It stops without a checkpoint."
        if job.state in ACTIVE:
            question += " Progress since its last checkpoint is lost."
        self.push_screen(ConfirmScreen(question, yes="Kill"),
                         lambda confirmed: self.send_intent(desired, job.id) if confirmed else None)

    # An experiment's group row under the cursor: pause, resume and kill reach each of its jobs.

    def selected_experiment(self, screen: Screen | None = None) -> str | None:
        """The experiment whose group row is under the cursor of screen (default: the one shown)."""
        table = next(iter((screen or self.screen).query(JobsTable)), None)
        return table.selected_experiment if table is not None else None

    def group_intent(self, experiment: str, desired: Desired) -> None:
        if desired is not Desired.KILLED:
            self.send_group_intent(desired, experiment)
            return
        question = f"Kill every unfinished job of experiment {experiment}? They stop without a checkpoint."
        self.push_screen(ConfirmScreen(question, yes="Kill"),
                         lambda confirmed: self.send_group_intent(desired, experiment) if confirmed else None)

    @work(thread=True, group="actions")
    def send_group_intent(self, desired: Desired, experiment: str) -> None:
        try:
            affected, jobs = client.set_group_intent(experiment, desired, home=self.home)
        except (client.JobNotFound, client.DaemonError, sqlite3.Error, OSError) as error:
            self.post_message(messages.ActionFinished(f"{desired.verb} {experiment}: {error}", failed=True))
            return
        self.post_message(messages.ActionFinished(f"{desired.verb.capitalize()} requested for {len(affected)} of the "
                                                  f"{len(jobs)} jobs of experiment {experiment}."))

    @work(thread=True, group="actions")
    def send_intent(self, desired: Desired, job_id: int) -> None:
        try:
            client.set_intent(str(job_id), desired, home=self.home)
        except client.IntentRefused as error:  # its state moved on since the key was pressed
            self.post_message(messages.ActionFinished(escape(printable(str(error))), failed=True))
            return
        except (client.JobNotFound, client.DaemonError, sqlite3.Error, OSError) as error:
            self.post_message(messages.ActionFinished(f"{desired.verb} job {job_id}: {error}", failed=True))
            return
        self.post_message(messages.ActionFinished(f"{desired.verb.capitalize()} requested for job {job_id}."))

    def action_edit(self) -> None:
        row = self.managed_row("edit")
        if row is None:
            return
        path = row.job.spec_path
        command = [*shlex.split(editor_command()), path]
        try:
            with self.suspend():
                code = subprocess.call(command)
        except SuspendNotSupported:
            self.notify(f"This terminal cannot hand over to an editor: edit {path} and the daemon applies it.",
                        severity="warning")
            return
        except OSError as error:
            self.notify(f"Could not run {command[0]}: {error}", severity="error")
            return
        if code:
            self.notify(f"{command[0]} exited with {code}.", severity="warning")
        self.notify(f"Saved {Path(path).name}: {self.edit_reach(path)}the daemon applies or refuses the edit "
                    f"(see Events).")
        self.request_poll()

    def edit_reach(self, path: str) -> str:
        """Name the jobs a shared file drives: one save reaches them all (a `submit --copy` job has its own)."""
        drives = jobs_following(path, [row.job for row in self.model.rows])
        if len(drives) < 2:
            return ""
        return f"this file drives jobs {', '.join(str(job.id) for job in sorted(drives, key=lambda job: job.id))}; "

    def action_submit(self) -> None:
        self.push_screen(SubmitScreen(os.getcwd()), self.submit_chosen)

    def submit_chosen(self, path: str | None) -> None:
        if path:
            self.submit_file(path)

    @work(thread=True, group="actions")
    def submit_file(self, path: str) -> None:
        try:
            job = client.submit(path, home=self.home)
        except (specs.SpecError, client.FileAlreadyBound, client.DaemonError, sqlite3.Error, OSError) as error:
            self.post_message(messages.ActionFinished(str(error), failed=True))
            return
        self.post_message(messages.ActionFinished(f"Submitted job {job.id} ({job.name})."))

    def action_start_daemon(self) -> None:
        self.start_daemon()

    @work(thread=True, group="actions", exclusive=True)
    def start_daemon(self) -> None:
        try:
            status = client.ensure_daemon(self.home)
        except (client.DaemonError, OSError) as error:
            self.post_message(messages.ActionFinished(str(error), failed=True))
            return
        self.post_message(messages.ActionFinished(f"The daemon runs (pid {status.pid})."))

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_details(self) -> None:
        if self.selected_row() is not None and not isinstance(self.screen, DetailScreen):
            self.push_screen(DetailScreen())

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "start_daemon":
            return self.model.daemon_running is False  # hidden from the footer while the daemon runs
        return True


def editor_command() -> str:
    return os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"


def run(home: Path | None = None) -> int:
    """Open the TUI on RLSUP_HOME (or home) until the user quits; the exit code for the shell."""
    app = RlsupApp(home)
    with stop_signals_close(app) as app.stop_request:
        app.run()
    app.stop_request.raise_if_received()
    return app.return_code or 0
