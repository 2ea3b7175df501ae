"""What the jobs table adds to a job row: a smoothed speed, the file/run disagreement, who holds each GPU."""
from __future__ import annotations

import json
from collections import deque
from pathlib import Path

from rlsup import client, paths
from rlsup.run import files as runfiles
from rlsup.run import metrics
from rlsup.jobs.state import State
from rlsup.formatting import number
from rlsup.run.status import WorkerStatus
from rlsup.views.gpus import jobs_by_gpu, memory_share
from rlsup.views.jobs import is_live
from rlsup.jobs.store import Job


def gpu_holders(jobs: list[Job]) -> dict[int, str]:
    """GPU index -> the active jobs placed on it, each with the memory it is packed by: "3 pong 3.1 GiB"."""
    return {index: ", ".join(holder_label(job) for job in holders) for index, holders in jobs_by_gpu(jobs).items()}


def holder_label(job: Job) -> str:
    """"3 pong 3.1 GiB": a job on a GPU, with its memory figure once one is known."""
    need = job.gpu_memory_need
    return f"{job.id} {job.name}" + (f" {memory_share(need, None)}" if need is not None else "")


# ---------------------------------------------------------------------------------------------
# Job file against run spec


class DriftCache:
    """Each job's spec_drift, recomputed only when its job file or its run's job.toml changes.

    A poll stats two files per job instead of parsing two TOML files per job, every second.
    """

    def __init__(self):
        self._known: dict[int, tuple[tuple, str | None]] = {}

    def drift(self, job: Job) -> str | None:
        if job.state is State.KILLED:
            return None  # the daemon no longer applies edits to it
        stamps = (job.spec_path, file_stamp(Path(job.spec_path)), file_stamp(Path(job.run_dir) / paths.JOB_FILE),
                  repr(sorted(job.override_values.items())))
        known = self._known.get(job.id)
        if known is None or known[0] != stamps:
            known = self._known[job.id] = (stamps, client.spec_drift(job))
        return known[1]


def file_stamp(path: Path) -> tuple[int, int]:
    """Size and modification time, (0, 0) for a missing file: changes whenever the file does."""
    try:
        stat = path.stat()
    except OSError:
        return (0, 0)
    return stat.st_size, stat.st_mtime_ns


# ---------------------------------------------------------------------------------------------
# Speed: smoothed for the ETA, and the plot scaled to training


RATE_WINDOW_S = 60.0     # a minute of samples: steady enough for an ETA, recent enough to follow a change
RATE_MINIMUM_S = 10.0    # less data than this says "–" rather than a number that will jump
SEED_LINES = 400         # metrics.jsonl lines read to seed a job's window (train records come about once a second)
WARM_UP_FACTOR = 3.0     # speeds above this many times the median are the random-action warm-up
FENCE_SPREAD = 3.0       # Tukey's "far out": a speed further above the upper quartile, in interquartile ranges


def smoothed_rate(samples, window_s: float = RATE_WINDOW_S, minimum_s: float = RATE_MINIMUM_S) -> float | None:
    """Steps per second over the last window_s of (time, step) samples, or None while under minimum_s.

    Dividing the steps left by the rate of the last second made the ETA jump by minutes within
    seconds. Samples before a step that went back (a resume from an older checkpoint) are dropped.
    """
    recent: list = []
    for sample in samples:
        if recent and sample[1] < recent[-1][1]:
            recent = []
        recent.append(sample)
    recent = [sample for sample in recent if sample[0] >= recent[-1][0] - window_s] if recent else []
    if len(recent) < 2 or recent[-1][0] - recent[0][0] < minimum_s:
        return None
    (first_time, first_step), (last_time, last_step) = recent[0], recent[-1]
    return (last_step - first_step) / (last_time - first_time)


class RateWindows:
    """Each running job's (time, step) samples from status.json, seeded from metrics.jsonl's train records
    so that a TUI started late or a worker just restarted has a rate without waiting a minute."""

    def __init__(self):
        self._samples: dict[int, deque] = {}

    def rate(self, job: Job, status: WorkerStatus | None) -> float | None:
        if not is_live(job, status):
            self._samples.pop(job.id, None)
            return None
        samples = self._samples.get(job.id)
        if samples is None:
            samples = self._samples[job.id] = deque(train_samples(Path(job.run_dir)), maxlen=4 * SEED_LINES)
        sample = (status.time, number(status.step))
        if None not in sample and (not samples or sample[0] > samples[-1][0]):
            samples.append(sample)
        return smoothed_rate(samples)


def train_samples(run_dir: Path) -> list[tuple[float, float]]:
    """(t, step) of the train records at the end of a run's metrics.jsonl."""
    samples = []
    for line in runfiles.tail_lines(run_dir / paths.METRICS_FILE, SEED_LINES):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line cut mid-write
        if isinstance(record, dict) and record.get(metrics.KIND) == metrics.TRAIN:
            sample = (number(record.get(metrics.TIME)), number(record.get(metrics.STEP)))
            if None not in sample:
                samples.append(sample)
    return samples


def training_phase_speeds(speeds) -> tuple[float, ...]:
    """Speeds with the random-action warm-up's (often 50 times faster) cut to the plot's training scale.

    Two ceilings, the lower one wins. WARM_UP_FACTOR times the median: the median is the training speed
    as soon as training has logged half the points. And Tukey's far-out fence, the upper quartile plus
    FENCE_SPREAD interquartile ranges: the window that mixes the warm-up's end with training (1,277 steps/s
    against about 300 steady, seen in a real CartPole run) is under three times the median yet far outside
    the spread of the training speeds, and it set the axis, squashing training into its bottom rows.
    """
    if not speeds:
        return ()
    ordered = sorted(speeds)
    upper = ordered[(3 * len(ordered)) // 4]
    fence = upper + FENCE_SPREAD * (upper - ordered[len(ordered) // 4])
    ceiling = min(WARM_UP_FACTOR * ordered[len(ordered) // 2], fence)
    return tuple(min(speed, ceiling) for speed in speeds)
