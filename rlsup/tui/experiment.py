"""The experiment pane: while a group row is under the cursor, its experiment's summary and variant table."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from rlsup.run import files as runfiles
from rlsup.decisions.ranking import figure
from rlsup.formatting import duration, printable
from rlsup.views.groups import (VARIANT_HEADINGS, Evaluated, GroupRow, VariantResult, evaluation_return,
                          variant_cells, variant_results)
from rlsup.views.jobs import JobRow
from rlsup.jobs.store import Job, Store
from rlsup.views.decisions import Comparison, SchedulerView, read_scheduler_view

READING = "reading its runs' evaluations…"


@dataclass(frozen=True)
class ExperimentRequest:
    """What the metrics poller reads for the pane, swapped whole by the UI thread: the experiment under the
    cursor (None on a job row) and its jobs; selections counts, as PlotRequest's does, so that A, B, A
    posts A's table afresh."""

    experiment: str | None = None
    jobs: tuple[Job, ...] = ()
    selections: int = 0

    def selected(self, experiment: str | None, jobs: tuple[Job, ...]) -> "ExperimentRequest":
        return ExperimentRequest(experiment, jobs, self.selections + 1)

    def followed(self, jobs: tuple[Job, ...]) -> "ExperimentRequest":
        """The same selection, its jobs as the store has them now (a later submit may have added seeds)."""
        return replace(self, jobs=jobs)


class EvaluationReader:
    """A run's last and best evaluation, read incrementally: what the variant table needs, in constant memory
    (an experiment may have a thousand runs; a JobMetrics each would hold their downsampled curves)."""

    def __init__(self, run_dir: str | Path):
        self.reader = runfiles.MetricsReader(Path(run_dir))
        self.evaluated: Evaluated | None = None

    def update(self) -> Evaluated | None:
        records = self.reader.read_new()
        if self.reader.restarted:  # a resume cut the file back: read_new has just returned it from the start
            self.reader.restarted, self.evaluated = False, None
        self.evaluated = evaluated_after(self.evaluated, records)
        return self.evaluated


def evaluated_after(evaluated: Evaluated | None, records: Iterable[dict]) -> Evaluated | None:
    """A run's evaluations so far, then those among its next records."""
    for record in records:
        value = evaluation_return(record)
        if value is not None:
            evaluated = Evaluated(value, value) if evaluated is None else evaluated.then(value)
    return evaluated


class ExperimentEvaluations:
    """The metrics poller's readers of the selected experiment's runs, kept while it stays selected."""

    def __init__(self):
        self.readers: dict[int, EvaluationReader] = {}

    def results(self, request: ExperimentRequest, plotted: Mapping[int, Evaluated | None],
                scheduler: SchedulerView | None = None) -> tuple[VariantResult, ...] | None:
        """The request's variant table as its runs' files say now; None while no experiment is selected.

        plotted: the evaluations of the jobs the plot has just read (on a group row, its first job's), which
        their metrics.jsonl need not be read for a second time. scheduler: what a PBT's forks descend from.
        """
        if request.experiment is None:
            self.readers.clear()
            return None
        self.readers = {job.id: self.readers.get(job.id) or EvaluationReader(job.run_dir)
                        for job in request.jobs if job.id not in plotted}

        def evaluated(job: Job) -> Evaluated | None:
            return plotted[job.id] if job.id in plotted else self.readers[job.id].update()

        lineage = {"roots": scheduler.roots, "replaced": scheduler.replaced} if scheduler is not None else {}
        return tuple(variant_results(list(request.jobs), evaluated, **lineage))


def experiment_jobs(rows: tuple[JobRow, ...], experiment: str | None) -> tuple[Job, ...]:
    return tuple(row.job for row in rows if experiment and row.job.experiment == experiment)


def experiment_group(rows: tuple[JobRow, ...], experiment: str | None) -> GroupRow | None:
    """The experiment's group row, its jobs in list order; None for no experiment, or one with no jobs left."""
    members = tuple(row for row in rows if experiment and row.job.experiment == experiment)
    return GroupRow(experiment, members) if experiment and members else None


def variant_table(results: tuple[VariantResult, ...]) -> Table:
    table = Table(box=None, padding=(0, 2, 0, 0), header_style="bold", show_edge=False)
    for heading in VARIANT_HEADINGS:
        table.add_column(heading, justify="left" if heading == "variant" else "right", no_wrap=heading != "variant")
    for cells in variant_cells(list(results)):
        table.add_row(*cells)
    return table


def group_grid(group: GroupRow, scheduler: SchedulerView | None) -> Table:
    """What the group row says, a label a line, and where its scheduler stands: in a pane a third of the screen
    wide, one line wrapped."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in (("Jobs", f"{len(group.rows)}: {group.counts}"),
                         ("Steps", f"{group.step:,} of {group.total_steps:,}"),
                         ("Latest return", f"{group.return_text} (mean ± std{' of the best variant' if group.swept else ''})"),
                         ("ETA", duration(group.eta_s))):
        grid.add_row(label, value)
    if scheduler is not None:
        grid.add_row("Outcome", Text(scheduler.outcome.sentence(),
                                     style="bold green" if scheduler.outcome.finished else ""))
    return grid


def comparison_table(comparison: Comparison) -> Table:
    """A rung's or a generation's members, best first: id, name, metric and verdict. In a narrow pane the name
    gives way, cut with an ellipsis; the figure and the verdict never are (the last two columns were cut at 120
    columns, a figure of 348 read as 34)."""
    table = Table(box=None, padding=(0, 2, 0, 0), show_header=False, show_edge=False)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(overflow="ellipsis", no_wrap=False)
    table.add_column(justify="right", no_wrap=True)
    table.add_column(no_wrap=True)
    for placed in comparison.placed:
        table.add_row(str(placed.member), printable(placed.name), figure(placed.value), placed.verdict)
    return table


def scheduler_parts(scheduler: SchedulerView) -> list[RenderableType]:
    """The scheduler's heading, each comparison under its title, and the lineage of its forks; every line wraps
    or gives way, none is cut silently."""
    parts: list[RenderableType] = [Text("Scheduler", style="bold"), Text(scheduler.heading, style="dim")]
    for comparison in scheduler.comparisons:
        parts += [Text(comparison.title), comparison_table(comparison)]
    if scheduler.lineage:
        parts += [Text("Lineage", style="bold"), *(Text(line) for line in scheduler.lineage)]
    return parts


@dataclass(frozen=True)
class ExperimentFigures:
    """What the pane shows of an experiment beyond its group row, as its runs and the store say now."""

    variants: tuple[VariantResult, ...]
    scheduler: SchedulerView | None = None   # its rungs, decisions and outcome (views/decisions.py)


def experiment_summary(group: GroupRow, figures: ExperimentFigures | None) -> Group:
    """The group row's figures and outcome, then what its scheduler decided, then variant -> n, final and best
    evaluation; figures None until they are read."""
    scheduler = figures.scheduler if figures is not None else None
    heading = Text("Evaluations", style="bold")
    heading.append(" (mean ± std over the seeds evaluated)", style="dim")
    table = variant_table(figures.variants) if figures is not None else Text(READING, style="dim")
    parts: list[RenderableType] = [group_grid(group, scheduler), Text("")]
    if scheduler is not None:
        parts += [*scheduler_parts(scheduler), Text("")]
    hint = Text("The plot shows its first job; space overlays the group's mean and band.", style="dim")
    return Group(*parts, heading, table, Text(""), hint)


def read_scheduler(request: ExperimentRequest, store: Store | None) -> SchedulerView | None:
    """The selected experiment's rungs, decisions and outcome from the store; None for one without a [scheduler]."""
    if request.experiment is None or store is None:
        return None
    return read_scheduler_view(store, request.experiment, list(request.jobs))


class ExperimentPane(VerticalScroll):
    """Shown in place of the selected job's checkpoints, events and log while its group row is under the cursor.

    It scrolls (the wheel, or tab then the arrows) when its experiment is taller than the pane, and its title
    says how many lines lie below or above: at 100x30 the last rung fell off the pane unseen."""

    experiment = ""  # the experiment shown, named in the title

    def compose(self) -> ComposeResult:
        yield Static(id="experiment-body")

    @property
    def content(self) -> RenderableType:
        """What the pane shows, whole (the part on screen may be less: see scrolled_title)."""
        return self.query_one("#experiment-body", Static).content

    def show(self, group: GroupRow | None, results: ExperimentFigures | None) -> None:
        body = self.query_one("#experiment-body", Static)
        if group is None:
            body.update("")
            return
        self.experiment = group.experiment
        body.update(experiment_summary(group, results))
        # Laid out again once painted: the layout that followed the update alone kept the body at its earlier
        # height when it grew past the pane (Textual 8.2), its last lines blank and the pane never scrolling.
        self.call_after_refresh(body.refresh, layout=True)
        self.call_after_refresh(self.show_scrolled)

    def show_scrolled(self) -> None:
        self.border_title = scrolled_title(self.experiment, round(self.scroll_y), round(self.max_scroll_y))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.show_scrolled()

    def watch_virtual_size(self) -> None:  # the body grew or shrank: as many lines more, or fewer, to scroll to
        self.call_after_refresh(self.show_scrolled)

    def on_resize(self) -> None:
        self.call_after_refresh(self.show_scrolled)


def scrolled_title(experiment: str, above: int, last: int) -> str:
    """"Experiment asha ↓ 5 more lines": the lines out of view below (and above, once scrolled)."""
    hidden = [f"↑ {above}" if above > 0 else "", f"↓ {last - above} more line{'s' if last - above != 1 else ''}"
              if last > above else ""]
    shown = " ".join(part for part in hidden if part)
    return f"Experiment {printable(experiment)}" + (f" · {shown}" if shown else "")
