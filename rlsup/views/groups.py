"""An experiment's jobs seen together: the group row of `rlsup list` and the TUI, and its variant table."""
from __future__ import annotations

import collections
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Mapping

from rlsup.spec import experiments
from rlsup.run import files as runfiles
from rlsup.run import metrics
from rlsup.formatting import MISSING, decimal, number
from rlsup.jobs.state import Desired, State
from rlsup.views.jobs import STATE_ORDER, JobRow
from rlsup.views.outcome import stopped_for_good
from rlsup.jobs.store import Job


@dataclass(frozen=True)
class Spread:
    """Mean and standard deviation of a value over an experiment's jobs (the sample's: n - 1; 0 for one job)."""

    mean: float
    std: float
    count: int

    def __str__(self) -> str:
        # One value has no sample deviation: "± 0.0" read as a measured spread of nothing.
        return f"{decimal(self.mean, 1)} ± {decimal(self.std, 1) if self.count > 1 else MISSING}"


def spread(values: list[float]) -> Spread | None:
    """The values' Spread; None for none."""
    if not values:
        return None
    return Spread(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values))


def shown(value: Spread | None) -> str:
    return str(value) if value is not None else MISSING


STOPPED = "stopped"  # a member its experiment's scheduler stopped (ASHA) or replaced (PBT), in a group's counts
# A group's counts, most urgent first; stopped beside paused.
COUNT_ORDER = {**{state.value: rank for state, rank in STATE_ORDER.items()},
               STOPPED: STATE_ORDER[State.PAUSED] + 0.5}


def steps_left(row: JobRow) -> int:
    return max(0, row.job.total_steps - row.step)


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
        """How many jobs are in each state, most urgent first: "2 running 1 queued"; a member its scheduler
        stopped for good counts as "stopped", not as paused ("2 stopped 2 done" once an ASHA experiment is over:
        "2 paused" read as work still to resume)."""
        counted = collections.Counter(STOPPED if stopped_for_good(row.job) else row.job.state.value
                                      for row in self.rows)
        words = sorted(counted, key=lambda name: COUNT_ORDER.get(name, 99))
        return " ".join(f"{counted[name]} {name}" for name in words)

    @property
    def variants(self) -> dict[str, tuple[JobRow, ...]]:
        """The rows by variant (experiments.variant_label: "" for seeds alone), in list order."""
        variants: dict[str, list[JobRow]] = {}
        for row in self.rows:
            variants.setdefault(experiments.variant_label(row.job.override_values), []).append(row)
        return {variant: tuple(rows) for variant, rows in variants.items()}

    @property
    def swept(self) -> bool:
        return len(self.variants) > 1

    @property
    def mean_return(self) -> Spread | None:
        """Over the jobs whose worker has reported a mean return."""
        return spread([row.mean_return for row in self.rows if row.mean_return is not None])

    @property
    def best_variant_return(self) -> Spread | None:
        """mean_return over the best variant's jobs (highest mean): in a sweep, a mean over different
        learning rates is no learning rate's return. The whole experiment's when it has one variant."""
        spreads = [spread([row.mean_return for row in rows if row.mean_return is not None])
                   for rows in self.variants.values()]
        known = [value for value in spreads if value is not None]
        return max(known, key=lambda value: value.mean) if known else None

    @property
    def return_text(self) -> str:
        """best_variant_return as the TUI shows it: "best " before a sweep's."""
        best = self.best_variant_return
        return f"best {best}" if self.swept and best is not None else shown(best)

    @property
    def eta_s(self) -> float | None:
        """When its last job is over: the slowest running job's ETA, or later when jobs still wait to run.

        A queued job runs as a slot frees, so the steps left in every job still to run are taken at the speed
        the running jobs make together (each one's steps left over its ETA). It used to be the slowest running
        job's alone, as if the queued jobs were not there. A paused job waits for a resume: not counted."""
        running = [row for row in self.rows if row.eta_s is not None]
        if not running or any(row.eta_s is None and row.job.state is State.RUNNING for row in self.rows):
            return None  # a member still warming up (views/jobs.py ETA_FROM) has steps left no speed times yet
        slowest = max(row.eta_s for row in running)
        queued = [row for row in self.rows if row.job.state is State.QUEUED and row.job.desired is Desired.RUNNING]
        speed = sum(steps_left(row) / row.eta_s for row in running if row.eta_s > 0)
        if not queued or speed <= 0:
            return slowest
        return max(slowest, sum(steps_left(row) for row in running + queued) / speed)

    @property
    def step(self) -> int:
        return sum(row.step for row in self.rows)

    @property
    def total_steps(self) -> int:
        """The steps its jobs will have trained once over: a member its scheduler stopped for good ends at the step
        it reached, not at the budget it will never train to."""
        return sum(row.step if stopped_for_good(row.job) else row.job.total_steps for row in self.rows)

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
# Evaluations: the variant table of `rlsup status EXPERIMENT` and of the TUI's experiment pane


@dataclass(frozen=True)
class VariantResult:
    """One variant (jobs alike but for their seed, and PBT forks of them): how many of its jobs have evaluated, and
    their final and best evaluation returns."""

    variant: str
    evaluated: int
    final: Spread | None
    best: Spread | None


@dataclass(frozen=True)
class Evaluated:
    """What the variant table takes of one run's evaluations: the last mean return and the best."""

    final: float
    best: float

    def then(self, value: float) -> "Evaluated":
        """After one more evaluation: for a reader that goes through a run's records once, in order."""
        return Evaluated(value, max(self.best, value))


def evaluation_return(record: dict) -> float | None:
    """An evaluation record's mean return; None for any other record (or a mean that is not a finite number)."""
    return number(record.get(metrics.EVAL_MEAN)) if record.get(metrics.KIND) == metrics.EVAL else None


def evaluations(run_dir: str | Path) -> list[float]:
    """The mean returns of a run's evaluations, in step order."""
    returns = (evaluation_return(record) for record in runfiles.read_metrics(Path(run_dir)))
    return [value for value in returns if value is not None]


def evaluated(run_dir: str | Path) -> Evaluated | None:
    """A run's last and best evaluation, read from its metrics; None before its first evaluation."""
    values = evaluations(run_dir)
    return Evaluated(values[-1], max(values)) if values else None


def variant_results(jobs: list[Job], evaluated_of: Callable[[Job], Evaluated | None] | None = None,
                    roots: Mapping[int, int] | None = None, replaced: Collection[int] = ()) -> list[VariantResult]:
    """Variant -> n (its jobs that have evaluated), final and best evaluation (mean ± std over them), in submission
    order.

    evaluated_of reads a job's evaluations (default: its whole metrics file; the TUI reads them incrementally).
    roots: a PBT fork -> the member its lineage began with (views/outcome.py), whose variant it is: a fork's
    perturbed values are no variant of their own. replaced: PBT members whose place a fork took, left out (their
    fork goes on with their place in the population)."""
    read = evaluated_of or (lambda job: evaluated(job.run_dir))
    by_id = {job.id: job for job in jobs}
    by_variant: dict[str, list[Job]] = {}
    for job in sorted(jobs, key=lambda job: job.id):
        root = by_id.get((roots or {}).get(job.id, job.id), job)
        label = experiments.variant_label(root.override_values)
        members = by_variant.setdefault(label, [])
        if job.id not in replaced:
            members.append(job)
    results = []
    for variant, members in by_variant.items():
        runs = [run for run in map(read, members) if run is not None]
        results.append(VariantResult(variant or "(seeds only)", len(runs), spread([run.final for run in runs]),
                                     spread([run.best for run in runs])))
    return results


VARIANT_HEADINGS = ("variant", "n", "final eval", "best eval")


def variant_cells(results: list[VariantResult]) -> list[tuple[str, str, str, str]]:
    """The variant table's rows as text, under VARIANT_HEADINGS; n 0 and "–" where a variant has no evaluation yet."""
    return [(result.variant, str(result.evaluated), shown(result.final), shown(result.best)) for result in results]
