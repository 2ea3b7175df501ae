"""The experiment pane: while a group row is under the cursor, its experiment's summary and variant table."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from rlsup.run import files as runfiles
from rlsup.formatting import duration
from rlsup.views.groups import (VARIANT_HEADINGS, Evaluated, GroupRow, VariantResult, evaluation_return,
                          variant_cells, variant_results)
from rlsup.views.jobs import JobRow
from rlsup.jobs.store import Job, Store
from rlsup.views.decisions import read_scheduler_lines

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

    def results(self, request: ExperimentRequest,
                plotted: Mapping[int, Evaluated | None]) -> tuple[VariantResult, ...] | None:
        """The request's variant table as its runs' files say now; None while no experiment is selected.

        plotted: the evaluations of the jobs the plot has just read (on a group row, its first job's), which
        their metrics.jsonl need not be read for a second time.
        """
        if request.experiment is None:
            self.readers.clear()
            return None
        self.readers = {job.id: self.readers.get(job.id) or EvaluationReader(job.run_dir)
                        for job in request.jobs if job.id not in plotted}

        def evaluated(job: Job) -> Evaluated | None:
            return plotted[job.id] if job.id in plotted else self.readers[job.id].update()

        return tuple(variant_results(list(request.jobs), evaluated))


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


def group_grid(group: GroupRow) -> Table:
    """What the group row says, a label a line: in a pane a third of the screen wide, one line wrapped."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for label, value in (("Jobs", f"{len(group.rows)}: {group.counts}"),
                         ("Steps", f"{group.step:,} of {group.total_steps:,}"),
                         ("Latest return", f"{group.return_text} (mean ± std{' of the best variant' if group.swept else ''})"),
                         ("ETA", duration(group.eta_s))):
        grid.add_row(label, value)
    return grid


@dataclass(frozen=True)
class ExperimentFigures:
    """What the pane shows of an experiment beyond its group row, as its runs and the store say now."""

    variants: tuple[VariantResult, ...]
    scheduler: tuple[str, ...] = ()   # its rungs and decisions (views/decisions.py), as `rlsup status` prints them


def experiment_summary(group: GroupRow, figures: ExperimentFigures | None) -> Group:
    """The group row's figures, then variant -> n, final and best evaluation, then what its scheduler decided;
    figures None until they are read."""
    heading = Text("Evaluations", style="bold")
    heading.append(" (mean ± std over seeds)", style="dim")
    table = variant_table(figures.variants) if figures is not None else Text(READING, style="dim")
    parts = [group_grid(group), Text(""), heading, table]
    if figures is not None and figures.scheduler:
        parts += [Text(""), Text("Scheduler", style="bold"), Text("\n".join(figures.scheduler), no_wrap=True)]
    hint = Text("The plot shows its first job; space overlays the group's mean and band.", style="dim")
    return Group(*parts, Text(""), hint)


def read_scheduler(request: ExperimentRequest, store: Store | None) -> tuple[str, ...]:
    """The selected experiment's rungs and decisions from the store; none for one without a [scheduler]."""
    if request.experiment is None or store is None:
        return ()
    return tuple(read_scheduler_lines(store, request.experiment, list(request.jobs)))


class ExperimentPane(Static):
    """Shown in place of the selected job's checkpoints, events and log while its group row is under the cursor."""

    def show(self, group: GroupRow | None, results: ExperimentFigures | None) -> None:
        if group is None:
            self.update("")
            return
        self.border_title = f"Experiment {group.experiment}"
        self.update(experiment_summary(group, results))
