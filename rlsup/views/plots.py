"""Curves for comparing runs: a run's series from metrics.jsonl, smoothing, and a group's mean with its band."""
from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Union

from rlsup import own_files, paths
from rlsup.run import files as runfiles
from rlsup.run import metrics
from rlsup.formatting import number, short_count

# The TUI's smoothing key steps through these; 0 is off. 0.9 is what the plots drew before there was a choice.
SMOOTHING_WEIGHTS = (0.0, 0.6, 0.9, 0.99)
DEFAULT_SMOOTHING = 0.9
GRID_POINTS = 200  # steps a group is resampled on: a point per braille column of a wide plot, smooth in a figure

# Metrics read from other records than `train` ones: name -> (record kind, field).
RECORD_FIELDS = {"return": (metrics.EPISODE, metrics.EPISODE_RETURN),
                 "length": (metrics.EPISODE, metrics.EPISODE_LENGTH), "eval_return": (metrics.EVAL, metrics.EVAL_MEAN)}
LOSS = "loss"  # stands for whichever loss the run's algorithm logs (DQN "loss", V-trace "total_loss")
METRIC_TITLES = {"return": "Episode return", "length": "Episode length", "eval_return": "Evaluation return",
                 LOSS: "Loss", "steps_per_second": "Steps per second"}


class UnknownMetric(ValueError):
    """A metric no record of a run carries."""


@dataclass(frozen=True)
class Series:
    """One run's values of a metric, in step order."""

    label: str
    steps: tuple[float, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class GroupSeries:
    """Several runs resampled on common steps: their mean, lowest and highest value, and standard deviation."""

    label: str
    steps: tuple[float, ...]
    mean: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    std: tuple[float, ...]
    runs: int


Line = Union[Series, GroupSeries]


# ---------------------------------------------------------------------------------------------
# Reading


def loss_names() -> tuple[str, ...]:
    from rlsup.spec import registry  # the registry discovers plugins: only a loss needs it

    return registry.loss_metric_names()


# The largest magnitude a plot shows: beyond a float32's 3.4e38 (all a trainer computes), and far enough below a
# double's 1.8e308 that matplotlib's limits and ticks, and a group's squared deviations, do not overflow (a
# received run's 1e308 ended `rlsup plot` in "arange: cannot compute length").
PLOT_MAX = 1e100


def plottable(value: object) -> float | None:
    """number(value) when a plot can show it, else None."""
    found = number(value)
    return found if found is not None and abs(found) <= PLOT_MAX else None


def metric_value(record: dict, metric: str, losses: tuple[str, ...] = ()) -> float | None:
    """The record's value of metric, or None when the record does not carry it (or one no plot can show)."""
    kind, field = RECORD_FIELDS.get(metric, (metrics.TRAIN, metric))
    if record.get(metrics.KIND) != kind:
        return None
    if metric == LOSS:
        return next((value for value in map(plottable, (record.get(name) for name in losses)) if value is not None),
                    None)
    return plottable(record.get(field))


def series_of(records: Iterable[dict], metric: str, label: str) -> Series:
    """The metric's points in records; a record without a step is placed at the latest step before it."""
    losses = loss_names() if metric == LOSS else ()
    steps: list[float] = []
    values: list[float] = []
    last_step = 0.0
    for record in records:
        step = plottable(record.get(metrics.STEP))
        if step is not None:
            last_step = max(last_step, step)
        value = metric_value(record, metric, losses)
        if value is not None:
            steps.append(last_step)
            values.append(value)
    return Series(label, tuple(steps), tuple(values))


def available_metrics(records: Iterable[dict]) -> set[str]:
    """Every metric name series_of can read from these records."""
    found = set()
    for record in records:
        if record.get(metrics.KIND) == metrics.TRAIN:
            found.update(key for key, value in record.items() if key not in metrics.COMMON_KEYS
                         and plottable(value) is not None)
        found.update(name for name, (kind, field) in RECORD_FIELDS.items()
                     if record.get(metrics.KIND) == kind and plottable(record.get(field)) is not None)
    if found & set(loss_names()):
        found.add(LOSS)
    return found


def records_of(run_dir: Path) -> Iterator[dict]:
    """The records of a run's metrics.jsonl one at a time: a million lines read as a list took gigabytes."""
    try:  # never through a link, never a FIFO that would block the read for ever
        handle = os.fdopen(own_files.open_own(Path(run_dir) / paths.METRICS_FILE, os.O_RDONLY), "rb")
    except (FileNotFoundError, own_files.NotOwnFile):
        return
    with handle:
        for line in handle:
            if line.endswith(b"\n"):  # a last line without one is still being written
                yield from runfiles.parse_lines(line)


def read_series(run_dir: Path, metric: str, label: str) -> Series:
    """A run's series of metric; raises UnknownMetric when the run has records but none carries it."""
    series = series_of(records_of(run_dir), metric, label)
    if not series.steps and metric not in RECORD_FIELDS:
        known = available_metrics(records_of(run_dir))
        if known:
            raise UnknownMetric(f"no record of {run_dir} has a metric {metric!r} (it has {', '.join(sorted(known))})")
    return series


# ---------------------------------------------------------------------------------------------
# Smoothing


class Smoother:
    """The debiased exponential moving average TensorBoard draws over a noisy series (weight 0: none)."""

    def __init__(self, weight: float = DEFAULT_SMOOTHING):
        self.weight, self.value, self.count = weight, 0.0, 0

    def add(self, y: float) -> float:
        self.count += 1
        self.value = self.weight * self.value + (1 - self.weight) * y
        return self.value / (1 - self.weight ** self.count)


def smooth(series: Series, weight: float) -> Series:
    """The series through a Smoother of weight, in step order."""
    if weight <= 0:
        return series
    smoother = Smoother(weight)
    return Series(series.label, series.steps, tuple(smoother.add(value) for value in series.values))


def next_smoothing(weight: float) -> float:
    """The weight after weight in SMOOTHING_WEIGHTS, round to off."""
    index = SMOOTHING_WEIGHTS.index(weight) if weight in SMOOTHING_WEIGHTS else -1
    return SMOOTHING_WEIGHTS[(index + 1) % len(SMOOTHING_WEIGHTS)]


def smoothing_label(weight: float) -> str:
    return f"smoothing {weight:g}" if weight > 0 else "smoothing off"


# ---------------------------------------------------------------------------------------------
# Groups


def interpolate(series: Series, step: float) -> float:
    """The series' value at step, on the straight line between the points around it (step within its range)."""
    index = bisect.bisect_left(series.steps, step)
    if index < len(series.steps) and series.steps[index] == step:
        return series.values[index]
    before, after = index - 1, index
    left, right = series.steps[before], series.steps[after]
    share = (step - left) / (right - left)
    return series.values[before] + share * (series.values[after] - series.values[before])


def common_grid(runs: list[Series], points: int = GRID_POINTS) -> tuple[float, ...]:
    """Evenly spaced steps from the latest first step to the earliest last step of runs: the steps every run
    has reached. A run behind the others cuts the group there, rather than the mean jumping where it ends."""
    if not runs or not all(run.steps for run in runs):
        return ()
    start, end = max(run.steps[0] for run in runs), min(run.steps[-1] for run in runs)
    if start > end:
        return ()
    if start == end or points < 2:
        return (start,)
    return tuple(start + (end - start) * index / (points - 1) for index in range(points))


def aggregate(runs: list[Series], label: str, points: int = GRID_POINTS) -> GroupSeries:
    """The runs on their common grid: mean, minimum, maximum and (population) standard deviation per step."""
    grid = common_grid(runs, points)
    columns = [[interpolate(run, step) for run in runs] for step in grid]
    means = [sum(column) / len(column) for column in columns]
    return GroupSeries(label=label, steps=grid, mean=tuple(means),
                       low=tuple(min(column) for column in columns), high=tuple(max(column) for column in columns),
                       std=tuple(math.sqrt(sum((value - mean) ** 2 for value in column) / len(column))
                                 for column, mean in zip(columns, means)),
                       runs=len(runs))


def line_of(runs: list[Series], label: str, points: int = GRID_POINTS) -> Line:
    """A single run as itself (relabelled), several as their group."""
    if len(runs) == 1:
        return Series(label, runs[0].steps, runs[0].values)
    return aggregate(runs, label, points)


def group_label(label: str, runs: int) -> str:
    return f"{label} (mean of {runs}, band min–max)"


# ---------------------------------------------------------------------------------------------
# Drawing in the terminal (plotext, for the TUI and `rlsup plot` without --out)

# One colour per compared run or group, bright for its line, plain for a group's band edges.
TERMINAL_COLOURS = ("cyan", "orange", "magenta", "green", "red", "blue", "yellow")
BAND_MARKER = "·"  # a group's lowest and highest run: dotted, below the braille resolution of the lines


def plot_ticks(low: float, high: float, count: int) -> tuple[list[float], list[str]]:
    """At most count ticks from low to high, on round numbers (1, 2 or 5 times a power of ten), labelled as numbers
    read elsewhere (short_count: 10k, 0.5): plotext's own were raw floats ("13735.5" steps). The ends alone where no
    round numbers fit."""
    if not high > low:
        return [low], [short_count(low)]
    rough = (high - low) / max(count - 1, 1)
    power = 10.0 ** math.floor(math.log10(rough)) if rough > 0 else 0.0
    if not power > 0:  # a span of a few subnormals, where 10.0 ** -324 is 0
        return [low, high], [short_count(low), short_count(high)]
    for step in (power * factor for factor in (0.1, 0.2, 0.5, 1, 2, 5, 10)):  # the most ticks that fit
        first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)  # 0.012 / 0.0005 is 24.000…04
        if 2 <= last - first + 1 <= count:
            ticks = [round(index * step, 12) for index in range(first, last + 1)]
            return ticks, [short_count(tick) for tick in ticks]
    return [low, high], [short_count(low), short_count(high)]


def terminal_lines(lines: Iterable[Line]) -> list[tuple[tuple, tuple, str | None, str, str]]:
    """(steps, values, legend label, colour, marker) for plotext: a colour per line, a group's mean
    labelled and its band's edges dotted without a label; lines without points are left out."""
    drawn = []
    for index, line in enumerate(lines):
        colour = TERMINAL_COLOURS[index % len(TERMINAL_COLOURS)]
        if isinstance(line, GroupSeries):
            drawn += [(line.steps, line.mean, line.label, colour + "+", "braille"),
                      (line.steps, line.low, None, colour, BAND_MARKER),
                      (line.steps, line.high, None, colour, BAND_MARKER)]
        else:
            drawn.append((line.steps, line.values, line.label, colour + "+", "braille"))
    return [entry for entry in drawn if entry[0]]
