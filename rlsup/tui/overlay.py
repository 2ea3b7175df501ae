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


def job_curve(row: JobRow) -> Curve:
    return Curve(str(row.job.id), f"{job_label(row.job)} {row.job.name}", ((row.job.id, row.job.run_dir),))


def group_curve(key: str, label: str, job_ids: list[int], rows: tuple[JobRow, ...]) -> Curve:
    """A group's curve: the jobs of job_ids that the table knows, drawn as their mean and band."""
    run_dirs = {row.job.id: row.job.run_dir for row in rows}
    return Curve(key, label, tuple((job_id, run_dirs[job_id]) for job_id in job_ids if job_id in run_dirs))


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

    def compared(self, selected: Curve | None) -> tuple[Curve, ...]:
        """Nothing while nothing is marked (the plot shows the selected job alone, as ever), else the marked
        curves and the selected job's, unless it is marked itself."""
        if not self.curves:
            return ()
        marked = tuple(curve for curves in self.curves.values() for curve in curves)
        return marked if selected is None or selected.key in self.curves else marked + (selected,)


def compared_lines(request: PlotRequest, metrics_of: Callable[[int], "JobMetrics"]
                   ) -> tuple[tuple[str, tuple[plotting.Line, ...]], ...]:
    """Per plot kind, a line for each compared curve: a job's series, or a group's mean and band."""
    if not request.compared:
        return ()
    lines = []
    for kind in PLOT_KINDS:
        kind_lines = []
        for curve in request.compared:
            runs = [metrics_of(job_id).series(kind, request.smoothing) for job_id, _ in curve.runs]
            label = curve.label if len(runs) == 1 else plotting.group_label(curve.label, len(runs))
            kind_lines.append(plotting.line_of(runs, label))
        lines.append((kind, tuple(kind_lines)))
    return tuple(lines)
