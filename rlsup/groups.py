"""An experiment's jobs seen together: the group row of `rlsup list` and the TUI, and its variant table."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from rlsup import experiments, runfiles
from rlsup.formatting import MISSING, decimal
from rlsup.jobview import STATE_ORDER, JobRow
from rlsup.store import Job


@dataclass(frozen=True)
class Spread:
    """Mean and standard deviation of a value over an experiment's jobs (the sample's: n - 1; 0 for one job)."""

    mean: float
    std: float
    count: int

    def __str__(self) -> str:
        return f"{decimal(self.mean, 1)} ± {decimal(self.std, 1)}"


def spread(values: list[float]) -> Spread | None:
    """The values' Spread; None for none."""
    if not values:
        return None
    return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values))


def shown(value: Spread | None) -> str:
    return str(value) if value is not None else MISSING


@dataclass(frozen=True)
class GroupRow:
    """An experiment: its jobs' rows (in list order) and what they add up to."""

    experiment: str
    rows: tuple[JobRow, ...]

    @property
    def job_ids(self) -> tuple[int, ...]:
        return tuple(row.job.id for row in self.rows)

    @property
    def counts(self) -> str:
        """How many jobs are in each state, most urgent first: "2 running 1 queued"."""
        states = sorted({row.job.state for row in self.rows}, key=lambda state: STATE_ORDER.get(state, 99))
        return " ".join(f"{sum(row.job.state is state for row in self.rows)} {state.value}" for state in states)

    @property
    def mean_return(self) -> Spread | None:
        """Over the jobs whose worker has reported a mean return."""
        return spread([row.mean_return for row in self.rows if row.mean_return is not None])

    @property
    def eta_s(self) -> float | None:
        """The slowest job's: the experiment is over when its last job is."""
        known = [row.eta_s for row in self.rows if row.eta_s is not None]
        return max(known) if known else None

    @property
    def step(self) -> int:
        return sum(row.step for row in self.rows)

    @property
    def total_steps(self) -> int:
        return sum(row.job.total_steps for row in self.rows)

    @property
    def sort_key(self) -> tuple:
        return min(row.sort_key for row in self.rows)


def grouped(rows: list[JobRow] | tuple[JobRow, ...]) -> list[JobRow | GroupRow]:
    """Lone jobs as they are and each experiment as one GroupRow, placed by its most urgent job."""
    members: dict[str, list[JobRow]] = {}
    for row in sorted(rows, key=lambda row: row.sort_key):
        if row.job.experiment:
            members.setdefault(row.job.experiment, []).append(row)
    entries: list[JobRow | GroupRow] = [row for row in rows if not row.job.experiment]
    entries += [GroupRow(name, tuple(group)) for name, group in members.items()]
    return sorted(entries, key=lambda entry: entry.sort_key)


# ---------------------------------------------------------------------------------------------
# Evaluations, for `rlsup status EXPERIMENT`


@dataclass(frozen=True)
class VariantResult:
    """One variant (jobs alike but for their seed): its jobs' final and best evaluation returns."""

    variant: str
    jobs: int
    final: Spread | None
    best: Spread | None


def evaluations(run_dir: str | Path) -> list[float]:
    """The mean returns of a run's evaluations, in step order."""
    return [record["mean"] for record in runfiles.read_metrics(Path(run_dir))
            if record.get("kind") == "eval" and isinstance(record.get("mean"), (int, float))]


def variant_results(jobs: list[Job]) -> list[VariantResult]:
    """Variant -> n, final and best evaluation (mean ± std over its seeds), in submission order."""
    by_variant: dict[str, list[Job]] = {}
    for job in sorted(jobs, key=lambda job: job.id):
        by_variant.setdefault(experiments.variant_label(job.override_values), []).append(job)
    results = []
    for variant, members in by_variant.items():
        returns = [evaluations(job.run_dir) for job in members]
        results.append(VariantResult(variant or "(seeds only)", len(members),
                                     spread([values[-1] for values in returns if values]),
                                     spread([max(values) for values in returns if values])))
    return results
