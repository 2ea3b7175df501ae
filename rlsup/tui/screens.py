"""The TUI's screens: the main jobs screen, a job's detail screen, and the help, confirm and submit dialogs."""
from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, Static

from rlsup.run import lineage
from rlsup.formatting import (DATE_AND_MINUTE, clock_time, decimal, duration, printable, printable_lines, short_count,
                               speed)
from rlsup.jobs.state import ACTIVE, State
from rlsup.views.jobs import JobRow, job_label, pid_of
from rlsup.jobs.store import Job
from rlsup.tui import overlay
from rlsup.tui.completion import PathSuggester
from rlsup.tui.experiment import ExperimentPane
from rlsup.tui.jobstable import JobsTable
from rlsup.tui.logtail import LogTail
from rlsup.tui.overlay import PLOT_KINDS
from rlsup.tui.widgets import CheckpointsTable, DaemonBanner, EventsLog, HardwareStrip, MetricsPlot, state_text

# Shown in the footer of both job screens; the actions live on the app so the palette shares them.
JOB_BINDINGS = [
    Binding("p", "app.pause", "Pause"),
    Binding("r", "app.resume", "Resume"),
    Binding("k", "app.kill", "Kill"),
    Binding("e", "app.edit", "Edit"),
    Binding("s", "app.submit", "Submit"),
    Binding("D", "app.start_daemon", "Start daemon"),
    Binding("S", "app.next_smoothing", "Smoothing", show=False),
    Binding("question_mark", "app.help", "Help"),
    Binding("q", "app.quit", "Quit"),
]

HELP = """\
[b]Jobs[/b]
  ↑ ↓        move between jobs          enter   the job's detail screen
  /          filter jobs by name        escape  clear the filter / go back
  m          next plot (return, loss, steps/s)
  space      mark / unmark the job: the plot overlays the marked jobs and the selected one
  → ← enter  open / close an experiment's group row; on it, the side shows its variant table
  S          next smoothing of the returns (off, 0.6, 0.9, 0.99)

[b]Actions on the selected job[/b]
  p          pause: the worker writes a checkpoint and stops
  r          resume from the newest checkpoint
  k          kill: stop without a checkpoint (asks first)
  e          edit the job file in $EDITOR; the daemon applies or refuses the edit (see Events)
  A foreground run (`rlsup run`, ID fg) is shown read-only: Ctrl-C in its terminal pauses it.

[b]Elsewhere[/b]
  s          submit a job file          D       start the daemon when it is down
  ctrl+p     command palette            ?       this help        q   quit
"""


# A terminal narrower or shorter than this gets the compact layout (app.tcss's `.-compact` rules).
COMPACT_WIDTH = 120
COMPACT_HEIGHT = 36
# How many label / value pairs a row of the detail screen's fields holds, by the screen's width: four
# at 100 columns wrapped every value.
DETAIL_COLUMNS = ((140, 4), (96, 3), (0, 2))


class JobView:
    """What a screen showing jobs implements; the app calls these on every such screen it has open and
    mounted (before then, the model keeps what arrives, and on_mount replays it)."""

    # Set by on_mount, before its replay: a screen on the stack whose widgets are not mounted yet has
    # no panes to show rows in (under load, a poll's rows reached one: NoMatches 'JobsTable').
    mounted = False

    def on_resize(self, event: events.Resize) -> None:
        compact = event.size.width < COMPACT_WIDTH or event.size.height < COMPACT_HEIGHT
        self.set_class(compact, "-compact")
        # A compact footer spaces its keys closer: at 100 columns, "q Quit" was under the palette's hint.
        self.query_one(Footer).compact = compact

    def show_daemon(self, running: bool) -> None:
        pass

    def show_jobs(self, rows: tuple[JobRow, ...]) -> None:
        pass

    def show_hardware(self, sample, holders: dict[int, str], read_by: str) -> None:
        pass

    def show_marks(self, keys: frozenset[str]) -> None:
        pass

    def show_experiment(self, group, results) -> None:
        pass

    def show_metrics(self, view) -> None:
        self._each(MetricsPlot, lambda plot: plot.show(view))

    def show_checkpoints(self, entries, verified: dict[str, str | None]) -> None:
        self._each(CheckpointsTable, lambda table: table.show(entries, verified))

    def mark_checkpoint(self, path: str, verified: dict[str, str | None]) -> None:
        self._each(CheckpointsTable, lambda table: table.mark(path, verified))

    def load_events(self, job_id: int | None, events) -> None:
        self._each(EventsLog, lambda log: log.load(job_id, events))

    def append_events(self, events) -> None:
        self._each(EventsLog, lambda log: log.append(events))

    def show_log(self, lines: tuple[str, ...]) -> None:
        self._each(LogTail, lambda log: log.show(lines))

    def _each(self, kind, show) -> None:
        for widget in self.query(kind):
            show(widget)

    def on_mount(self) -> None:
        self.mounted = True
        self.app.model.replay(self)


class MainScreen(JobView, Screen):
    """Jobs table, hardware strip, and the selected job's plot, checkpoints, events and log."""

    BINDINGS = [Binding("slash", "filter", "Filter"),
                Binding("m", "next_plot", "Plot"), Binding("escape", "clear_filter", "Clear filter", show=False),
                Binding("space", "toggle_mark", "Mark", show=False),
                *JOB_BINDINGS]

    def compose(self) -> ComposeResult:
        yield Header()
        yield DaemonBanner(id="banner")
        yield HardwareStrip(id="hardware")
        yield Input(placeholder="filter jobs by name (enter to keep, escape to clear)", id="filter")
        yield JobsTable(id="jobs")
        with Horizontal(id="panes"):
            yield MetricsPlot(id="plot")
            with Vertical(id="side"):
                yield CheckpointsTable(id="checkpoints")
                yield EventsLog(id="events")
                yield LogTail(id="log")
                yield ExperimentPane(id="experiment")
        yield Footer()

    def on_mount(self) -> None:
        for selector, title in (("#checkpoints", "Checkpoints"), ("#events", "Events"), ("#log", "worker.log"),
                                ("#plot", "Metrics (m: next plot, space: mark, S: smoothing)")):
            self.query_one(selector).border_title = title
        self.query_one(JobsTable).focus()
        super().on_mount()

    # What the pollers send may land while the app closes and Textual removes the screen's widgets: each
    # update finds its widgets with query(), and one whose widget is gone is dropped, not raised.

    def show_daemon(self, running: bool) -> None:
        self._each(DaemonBanner, lambda banner: banner.show(running))

    def show_jobs(self, rows: tuple[JobRow, ...]) -> None:
        tables, filters = self.query(JobsTable), self.query("#filter")
        if not tables or not filters:
            return
        table = tables.first()
        table.show_rows(rows, filters.first(Input).value)
        self.app.show_marks_passing(table.keys_passing_filter)
        # A filter that hid the selected row left the cursor on another without a highlight event (the
        # cursor's index did not change): select what the cursor is on, or nothing when no row is shown,
        # so that the panes and the keys never act on a job the screen no longer shows.
        self.select_row(table.selected_key)

    def show_hardware(self, sample, holders: dict[int, str], read_by: str) -> None:
        self._each(HardwareStrip, lambda strip: strip.show(sample, holders, read_by))

    def show_marks(self, keys: frozenset[str]) -> None:
        self._each(JobsTable, lambda table: table.show_marks(keys))

    def show_experiment(self, group, results) -> None:
        """A group row's experiment in place of its first job's checkpoints, events and log; None: the job's."""
        self._each("#side", lambda side: side.set_class(group is not None, "-experiment"))
        self._each(ExperimentPane, lambda pane: pane.show(group, results))

    def action_toggle_mark(self) -> None:
        table = self.query_one(JobsTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            curves = overlay.curves_for_key(key, self.app.model.rows)
            if curves:
                self.app.toggle_mark(*curves)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if isinstance(event.data_table, JobsTable) and event.row_key.value is not None:
            self.select_row(event.row_key.value)

    def select_row(self, key: str | None) -> None:
        """Select the job of the row key names (a group row: its first job, and its experiment); None: none."""
        job_ids = self.query_one(JobsTable).group_job_ids(key) if key is not None else ()
        if job_ids or key is None:
            self.app.select_job(job_ids[0] if job_ids else None)
        self.app.select_experiment(overlay.experiment_of_key(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if isinstance(event.data_table, JobsTable):
            self.app.action_details()

    def go_to(self, job_id: int) -> None:
        """Put the cursor on a job, clearing a filter that hides it."""
        table = self.query_one(JobsTable)
        table.reveal(job_id)
        if job_id not in table.rows_shown:
            self.action_clear_filter()
        if job_id in table.rows_shown:
            table.move_cursor(row=table.get_row_index(str(job_id)))

    def go_to_experiment(self, experiment: str) -> None:
        """Put the cursor on an experiment's group row, clearing a filter that hides it."""
        table = self.query_one(JobsTable)
        if experiment not in table.groups_shown:
            self.action_clear_filter()
        if experiment in table.groups_shown:
            table.move_cursor(row=table.get_row_index(overlay.group_key(experiment)))

    def action_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.add_class("-shown")
        field.focus()

    def action_clear_filter(self) -> None:
        field = self.query_one("#filter", Input)
        field.value = ""
        field.remove_class("-shown")
        self.query_one(JobsTable).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.show_jobs(self.app.model.rows)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.input.set_class(bool(event.value), "-shown")
            self.query_one(JobsTable).focus()

    def action_next_plot(self) -> None:
        plot = self.query_one(MetricsPlot)
        plot.show_kind(PLOT_KINDS[(PLOT_KINDS.index(plot.kind) + 1) % len(PLOT_KINDS)])


class DetailScreen(JobView, Screen):
    """Everything about the selected job: its fields, all three plots, checkpoints, events and log."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), *JOB_BINDINGS]

    def compose(self) -> ComposeResult:
        yield Header()
        # Scrolls when compact: at 100×30 the fields, plots and panes in one screen left the plots 3 rows.
        with VerticalScroll(id="detail-body"):
            yield Static(id="info")
            with Horizontal(id="plots"):
                for kind in PLOT_KINDS:
                    # The job's own curves: marked CartPole runs squashed a MinAtar job's into 12k of 80k.
                    yield MetricsPlot(kind, overlays=False)
            with Horizontal(id="lower"):
                yield CheckpointsTable(id="detail-checkpoints")
                yield EventsLog(id="detail-events")
                yield LogTail(id="detail-log")
        yield Footer()

    def on_mount(self) -> None:
        for selector, title in (("#detail-checkpoints", "Checkpoints"), ("#detail-events", "Events"),
                                ("#detail-log", "worker.log"), ("#info", "Job")):
            self.query_one(selector).border_title = title
        super().on_mount()

    def show_jobs(self, rows: tuple[JobRow, ...]) -> None:
        row = next((row for row in rows if row.job.id == self.app.selected_job_id), None)
        if row is not None:
            # The body's width, less its scrollbar when it scrolls: the screen's wrapped every value at 100.
            width = self.query_one("#detail-body").scrollable_content_region.width or self.size.width
            per_row = next(count for least, count in DETAIL_COLUMNS if width >= least)
            self.query_one("#info", Static).update(job_details(row, self.app.home, per_row))

    def on_resize(self, event: events.Resize) -> None:
        super().on_resize(event)
        self.show_jobs(self.app.model.rows)


def job_details(row: JobRow, home: Path, per_row: int = 4) -> Group:
    """The job's fields as a grid of label / value pairs, then its reason and paths at full width."""
    job = row.job
    stamp = DATE_AND_MINUTE
    pairs: list[tuple[str, object]] = [
        ("Job", f"{job_label(job)} {printable(job.name)}"), ("State", state_text(job.state)),
        ("Algo / env", f"{job.algo} on {job.env}"), ("Wanted", str(job.desired)),
        ("Step", f"{short_count(row.step)} of {short_count(job.total_steps)}"),
        ("Steps/s", speed(row.steps_per_second)), ("ETA", duration(row.eta_s)),
        ("Mean return", decimal(row.mean_return, 2)),
        ("Priority", str(job.priority)), ("Restarts", f"{job.restarts} of {job.max_restarts}"),
        # A cluster job's GPUs are the cluster's to pick: where it runs (cluster and node) instead.
        ("Cluster", job.where) if job.cluster else ("GPUs", job.gpus or "none"), ("PID", str(pid_of(job) or "–")),
        ("Submitted", clock_time(job.submitted, stamp)), *run_times(job),
    ]
    return Group(label_grid(pairs, per_row),
                 label_grid([("Reason", printable_lines(job.reason or "–")),  # a job's data: shown, never acted on
                             ("Job file", printable(job.spec_path)
                              + (f"  ⚠ {printable_lines(row.drift)}" if row.drift else "")),
                             ("Run dir", printable(home_relative(job.run_dir, home))),
                             *lineage_pairs(Path(job.run_dir))], per_row=1))


def lineage_pairs(run_dir: Path) -> list[tuple[str, str]]:
    """A fork's parent and the chain of forks it ends (parent.json: one small file), else nothing."""
    parent = lineage.read_parent(run_dir)
    if parent is None:
        problem = lineage.parent_problem(run_dir)  # a damaged fork says so, as `rlsup status` does
        return [("Forked from", printable(problem))] if problem else []
    return [("Forked from", printable_lines(f"{parent.origin}\n{lineage.lineage_line(run_dir)}"))]


def run_times(job: Job) -> list[tuple[str, str]]:
    """The times true of the job's state. The store's `finished` is when a worker last ended, so for a
    running job it was its last pause: "Finished" is shown only for a job that ended for good."""
    started, ended = clock_time(job.started, DATE_AND_MINUTE), clock_time(job.finished, DATE_AND_MINUTE)
    if job.state in ACTIVE:
        return [("Running since", started)]
    if job.state is State.QUEUED:
        return [("Last stopped", ended)] if job.finished else []
    return [("Started", started), ("Paused at" if job.state is State.PAUSED else "Finished", ended)]


def label_grid(pairs: list[tuple[str, object]], per_row: int) -> Table:
    grid = Table.grid(padding=(0, 2))
    for _ in range(per_row):
        grid.add_column(style="bold", min_width=11)
        grid.add_column()
    for index in range(0, len(pairs), per_row):
        grid.add_row(*[cell for pair in pairs[index:index + per_row] for cell in pair])
    return grid


def home_relative(path: str, home: Path) -> str:
    try:
        return str(Path(path).relative_to(home))
    except ValueError:
        return path


class HelpScreen(ModalScreen):
    """The keys."""

    BINDINGS = [Binding("escape,question_mark,q", "app.pop_screen", "Close")]

    def compose(self) -> ComposeResult:
        # The keys scroll (↑ ↓, page keys): at 100×30 the help was cut off after its second section.
        with VerticalScroll(id="dialog"):
            yield Static(HELP)
            yield Label(f"RLSUP_HOME: {self.app.home}", id="help-home")

    def on_mount(self) -> None:
        self.query_one("#dialog").focus()


class ConfirmScreen(ModalScreen[bool]):
    """A yes / no question; dismissed with True only on an explicit yes."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(self, question: str, yes: str = "Yes"):
        super().__init__()
        self.question, self.yes = question, yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.question, id="question")
            with Horizontal(id="buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class SubmitScreen(ModalScreen[str]):
    """A job file path with completion from the filesystem; dismissed with the path, or "" to cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("tab", "complete", "Complete", priority=True)]

    def __init__(self, directory: str):
        super().__init__()
        self.directory = directory

    def compose(self) -> ComposeResult:
        # The directory is a placeholder, not the field's text: held as text, a typed absolute path was
        # appended to it. A relative path is read from it (client.submit resolves against the cwd).
        with Vertical(id="dialog"):
            yield Label("Submit a job file (tab completes, enter submits, escape cancels)")
            yield Input(placeholder=f"a path, absolute or relative to {self.directory}", suggester=PathSuggester(),
                        id="path")

    def action_complete(self) -> None:
        field = self.query_one(Input)
        field.cursor_position = len(field.value)
        field.action_cursor_right()  # at the end of the text, this accepts the suggestion

    def action_cancel(self) -> None:
        self.dismiss("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())
