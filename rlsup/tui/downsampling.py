"""Plot downsampling: a growing series kept in a fixed number of buckets, spikes and all."""
from __future__ import annotations

import math

from rlsup.views import plots as plotting
PLOT_BUCKETS = 400


class _Bucket:
    """Consecutive points of a series as their count, sum, first and last step, minimum and maximum."""

    __slots__ = ("count", "total", "first_x", "last_x", "min_x", "min_y", "max_x", "max_y")

    def __init__(self, x: float, y: float):
        self.count, self.total = 1, y
        self.first_x = self.last_x = self.min_x = self.max_x = x
        self.min_y = self.max_y = y

    def add(self, x: float, y: float) -> None:
        self.count += 1
        self.total += y
        self.last_x = x
        if y < self.min_y:
            self.min_x, self.min_y = x, y
        if y > self.max_y:
            self.max_x, self.max_y = x, y

    def absorb(self, other: "_Bucket") -> None:
        self.count += other.count
        self.total += other.total
        self.last_x = other.last_x
        if other.min_y < self.min_y:
            self.min_x, self.min_y = other.min_x, other.min_y
        if other.max_y > self.max_y:
            self.max_x, self.max_y = other.max_x, other.max_y


class Downsampler:
    """A growing series kept in at most `capacity` buckets of equal point count.

    Each bucket keeps its minimum and maximum point, so spikes survive any amount of data; when the
    buckets run out, neighbours merge pairwise and each bucket takes twice as many points. Adding is
    amortised O(1) and memory is O(capacity) however long the run.
    """

    def __init__(self, capacity: int = PLOT_BUCKETS):
        if capacity < 2 or capacity % 2:
            raise ValueError("capacity must be an even number of at least 2")
        self.capacity = capacity
        self.width = 1           # points per full bucket
        self.count = 0           # points added in all
        self.buckets: list[_Bucket] = []

    def add(self, x: float, y: float) -> None:
        if not math.isfinite(y):
            return
        self.count += 1
        if self.buckets and self.buckets[-1].count < self.width:
            self.buckets[-1].add(x, y)
            return
        self.buckets.append(_Bucket(x, y))
        if len(self.buckets) > self.capacity:
            self._merge_pairs()

    def _merge_pairs(self) -> None:
        merged = []
        for index in range(0, len(self.buckets) - 1, 2):
            first = self.buckets[index]
            first.absorb(self.buckets[index + 1])
            merged.append(first)
        if len(self.buckets) % 2:
            merged.append(self.buckets[-1])
        self.buckets = merged
        self.width *= 2

    def envelope(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Each bucket's minimum and maximum point in step order: the raw series' shape, spikes kept."""
        xs: list[float] = []
        ys: list[float] = []
        for bucket in self.buckets:
            points = sorted({(bucket.min_x, bucket.min_y), (bucket.max_x, bucket.max_y)})
            for x, y in points:
                xs.append(x)
                ys.append(y)
        return tuple(xs), tuple(ys)

    def means(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Each bucket's mean at its middle step: a line through the series."""
        return (tuple((bucket.first_x + bucket.last_x) / 2 for bucket in self.buckets),
                tuple(bucket.total / bucket.count for bucket in self.buckets))


class SmoothedSeries:
    """A series downsampled once per smoothing weight, so that the smoothing key redraws at once, without
    reading the run again (each weight costs its Smoother and PLOT_BUCKETS buckets)."""

    def __init__(self, capacity: int = PLOT_BUCKETS):
        self.smoothed = {weight: (plotting.Smoother(weight), Downsampler(capacity))
                         for weight in plotting.SMOOTHING_WEIGHTS}

    def add(self, x: float, y: float) -> None:
        for smoother, points in self.smoothed.values():
            points.add(x, smoother.add(y))

    def means(self, weight: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
        return self.smoothed[weight][1].means()
