"""Curves side by side in the TUI: the marked jobs and groups, and the lines the plot overlays for them."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from rlsup.views import plots as plotting
from rlsup.views.groups import GroupRow
from rlsup.views.jobs import JobRow, job_label

if TYPE_CHECKING:
    from rlsup.tui.metrics import JobMetrics

PLOT_KINDS = ("return", "loss", "speed")


@dataclass(frozen=True)
class Curve:
    """One legend entry: a job's line, or a group's mean and band when it has several runs."""

    key: str  # the jobs table's row key that marked it
    label: str
    runs: tuple[tuple[int, str], ...]  # (job id, run directory) of each job it draws
    names: tuple[str, ...] = ()  # each run's job as the table names it ("7 seeds-s3"), for the legend


@dataclass(frozen=True)
class PlotRequest:
    """What the metrics poller reads, swapped whole by the UI thread: the selected job, the curves compared
    (empty while nothing is marked) and the smoothing; selections counts, so A, B, A posts A afresh."""

    job_id: int | None = None
    run_dir: str | None = None
    compared: tuple[Curve, ...] = ()
    smoothing: float = plotting.DEFAULT_SMOOTHING
    selections: int = 0

    def runs(self) -> dict[int, str]:
        """Every job whose metrics are read: the selected one and each compared curve's."""
        runs = {job_id: run_dir for curve in self.compared for job_id, run_dir in curve.runs}
        if self.job_id is not None and self.run_dir is not None:
            runs[self.job_id] = self.run_dir
        return runs

    def selected(self, job_id: int | None, run_dir: str | None) -> "PlotRequest":
        return replace(self, job_id=job_id, run_dir=run_dir, selections=self.selections + 1)


def job_name(row: JobRow) -> str:
    return f"{job_label(row.job)} {row.job.name}"


def job_curve(row: JobRow) -> Curve:
    return Curve(str(row.job.id), job_name(row), ((row.job.id, row.job.run_dir),), (job_name(row),))


def group_curve(key: str, label: str, job_ids: list[int], rows: tuple[JobRow, ...]) -> Curve:
    """A group's curve: the jobs of job_ids that the table knows, drawn as their mean and band."""
    known = {row.job.id: row for row in rows}
    members = [known[job_id] for job_id in job_ids if job_id in known]
    return Curve(key, label, tuple((row.job.id, row.job.run_dir) for row in members),
                 tuple(job_name(row) for row in members))


# Group rows: an experiment's key is never a job id (those are digits), so job rows keep their keys.
GROUP_KEY_PREFIX = "experiment:"


def group_key(experiment: str) -> str:
    return GROUP_KEY_PREFIX + experiment


def experiment_of_key(key: str | None) -> str | None:
    """The experiment a group row's key names; None for a job row's key."""
    return key[len(GROUP_KEY_PREFIX):] if key and key.startswith(GROUP_KEY_PREFIX) else None


def curves_for_key(key: str, rows: tuple[JobRow, ...]) -> tuple[Curve, ...]:
    """The curves a jobs-table row stands for: a job's own, or for a group row a mean and band per variant
    (an experiment of seeds alone has one): averaged over a sweep's learning rates, a line is no rate's."""
    experiment = experiment_of_key(key)
    if experiment is not None:
        group = GroupRow(experiment, tuple(row for row in rows if row.job.experiment == experiment))
        return tuple(group_curve(key, f"{experiment} {variant}".strip(), [row.job.id for row in members], rows)
                     for variant, members in group.variants.items())
    row = next((row for row in rows if str(row.job.id) == key), None)
    return (job_curve(row),) if row is not None else ()


class Marks:
    """The rows marked with space, in the order marked, each with its curves; the selected job is drawn
    beside them."""

    def __init__(self):
        self.curves: dict[str, tuple[Curve, ...]] = {}
        # Marked rows the jobs table's filter hides: kept marked, left out of the plot until the filter shows
        # them again (a filtered-out group stayed overlaid beside the rows shown: issue 50 item 8).
        self.hidden: frozenset[str] = frozenset()

    def toggle(self, *curves: Curve) -> bool:
        """Mark a row's curves (all of one key), or unmark the row when it is marked already; True when it is
        marked now."""
        key = curves[0].key
        if self.curves.pop(key, None) is not None:
            return False
        self.curves[key] = curves
        return True

    def keys(self) -> frozenset[str]:
        return frozenset(self.curves)

    def show_only(self, passing_filter: frozenset[str]) -> bool:
        """Hide the marked rows whose keys are not in passing_filter; True when that changed what is hidden."""
        hidden = self.keys() - passing_filter
        changed, self.hidden = hidden != self.hidden, hidden
        return changed

    def compared(self, selected: Curve | None) -> tuple[Curve, ...]:
        """Nothing while no marked row is shown (the plot shows the selected job alone, as ever), else the
        shown marked curves and the selected job's, unless it is marked itself."""
        marked = tuple(curve for key, curves in self.curves.items() if key not in self.hidden for curve in curves)
        if not marked:
            return ()
        return marked if selected is None or selected.key in self.curves else marked + (selected,)


def compared_lines(request: PlotRequest, metrics_of: Callable[[int], "JobMetrics"]
                   ) -> tuple[tuple[str, tuple[plotting.Line, ...]], ...]:
    """Per plot kind, a line for each compared curve: a job's series, or a group's mean and band."""
    if not request.compared:
        return ()
    return tuple((kind, tuple(curve_line(curve, kind, request.smoothing, metrics_of) for curve in request.compared))
                 for kind in PLOT_KINDS)


def curve_line(curve: Curve, kind: str, smoothing: float, metrics_of: Callable[[int], "JobMetrics"]
               ) -> plotting.Line:
    """A curve's line of a plot kind: the mean and band of its runs that have points, its label naming those
    that have none. A run without points left the group's common grid empty: a marked group whose last seed
    had not reported yet drew nothing, with no word of why (issue 50 item 8)."""
    series = [metrics_of(job_id).series(kind, smoothing) for job_id, _ in curve.runs]
    runs = [run for run in series if run.steps] or series
    label = curve.label if len(runs) == 1 else plotting.group_label(curve.label, len(runs))
    waiting = [name for name, run in zip(curve.names, series) if not run.steps]
    if waiting and len(waiting) < len(series):
        label += f" · {', '.join(waiting)}: no data yet"
    return plotting.line_of(runs, label)
