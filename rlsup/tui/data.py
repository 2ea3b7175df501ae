"""The TUI's data side: pollers reading the store and run files into messages for the UI thread."""
from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Callable

from rlsup import client, paths
from rlsup.run import files as runfiles
from rlsup.checkpoint.manifest import checkpoints_dir, list_checkpoints
from rlsup.hardware import Sample
from rlsup.jobs.state import ACTIVE, State
from rlsup.run.status import WorkerStatus, read_worker_status
from rlsup.views.jobs import JobRow, foreground_jobs, is_foreground, merge_status
from rlsup.views.jobs import sorted_rows
from rlsup.views.groups import Evaluated
from rlsup.jobs.store import Job, Store
from rlsup.tui import messages
from rlsup.tui.experiment import ExperimentEvaluations, ExperimentFigures, ExperimentRequest, read_scheduler
from rlsup.tui.metrics import JobMetrics
from rlsup.tui.overlay import PlotRequest, compared_lines
from rlsup.tui.rows import DriftCache, RateWindows, file_stamp, gpu_holders

EVENT_HISTORY = 200
LOG_LINES = 200
METRICS_KEPT = 4           # jobs, besides those plotted, whose series stay in memory: switching back does not re-read
HARDWARE_EVERY_S = 1.0


class Poller:
    """Reads the store and the selected job's run files; poll() returns the messages to post.

    Built on the UI thread, polled from one worker thread (which opens its own Store); the UI
    thread only ever calls select(), which swaps one tuple the next poll reads once. A message is
    posted only when what it carries differs from what was posted last under the same name.
    """

    def __init__(self, home: Path, hardware=None, *,
                 daemon_status: Callable[[Path], client.DaemonStatus] = client.daemon_status,
                 hardware_every_s: float = HARDWARE_EVERY_S):
        self.home = Path(home)
        self.hardware = hardware
        self.daemon_status = daemon_status
        self.hardware_every_s = hardware_every_s
        self.selection: tuple[int | None, int] = (None, 0)  # the job, and how many selections so far
        self.store: Store | None = None
        self._owns_hardware = hardware is None
        self._posted: dict[str, object] = {}
        self._statuses: dict[int, tuple[State, WorkerStatus | None]] = {}
        self._last_event_id: int | None = None
        self._hardware_at = -math.inf
        self.drifts = DriftCache()
        self.rates = RateWindows()

    def poll(self) -> list:
        try:
            return self._poll()
        except (sqlite3.Error, OSError) as error:
            # A locked or briefly missing database must not end the poller. What this poll had
            # read is lost with its messages, so the next one posts everything again.
            self._close_store()
            self._posted.clear()
            return [messages.PollFailed(f"{type(error).__name__}: {error}")]

    def select(self, job_id: int | None) -> None:
        """Called by the UI thread; counted, so that A, B, A between two polls still shows A afresh."""
        self.selection = (job_id, self.selection[1] + 1)

    def _changed(self, name: str, value: object) -> bool:
        if name in self._posted and self._posted[name] == value:
            return False
        self._posted[name] = value
        return True

    def _poll(self) -> list:
        if self.store is None:
            self.store = Store(self.home)
        posted = []
        status = self.daemon_status(self.home)
        if self._changed("daemon", (status.running, status.pid)):
            posted.append(messages.DaemonChanged(status.running, status.pid))
        stored = self.store.jobs()
        jobs = stored + foreground_jobs(self.home, stored)  # `rlsup run`s, shown read-only
        rows = sorted_rows([self._row(job) for job in jobs])
        if self._changed("rows", rows):
            posted.append(messages.JobsRefreshed(rows))
        posted += self._event_messages()
        selection = self.selection
        job = next((job for job in jobs if job.id == selection[0]), None)
        if job is not None:
            posted += self._selection_messages(job, selection)
        posted += self._hardware_messages(jobs, status.running)
        return posted

    def _row(self, job: Job) -> JobRow:
        status = self._status(job)
        drift = None if is_foreground(job) else self.drifts.drift(job)  # a foreground run follows no job file
        return merge_status(job, status, rate=self.rates.rate(job, status), drift=drift)

    def _status(self, job: Job) -> WorkerStatus | None:
        """status.json, re-read while the job is active or after its state changed, cached otherwise."""
        cached = self._statuses.get(job.id)
        if cached is None or job.state in ACTIVE or cached[0] is not job.state:
            cached = (job.state, read_worker_status(job.run_dir))
            self._statuses[job.id] = cached
        return cached[1]

    def _event_messages(self) -> list:
        if self._last_event_id is None:
            newest = self.store.events(limit=1)
            self._last_event_id = newest[-1].id if newest else 0
            return []
        new = self.store.events_since(self._last_event_id)
        if not new:
            return []
        self._last_event_id = new[-1].id
        return [messages.EventsAppended(tuple(new))]

    def _selection_messages(self, job: Job, selection: tuple) -> list:
        # The UI empties the job's panes on each selection: everything is posted again after one.
        posted = []
        if self._changed("selected", selection):
            posted.append(messages.JobEventsLoaded(job.id, tuple(self.store.events(job.id, EVENT_HISTORY))))
        # Directory names are cheap to list; manifests are read only when the names change.
        try:
            names = tuple(sorted(os.listdir(checkpoints_dir(job.run_dir))))
        except (FileNotFoundError, NotADirectoryError):
            names = ()
        if self._changed("checkpoints", (selection, names)):
            posted.append(messages.CheckpointsListed(job.id, tuple(list_checkpoints(Path(job.run_dir)))))
        log = Path(job.run_dir) / paths.LOG_FILE
        if self._changed("log", (selection, file_stamp(log))):
            posted.append(messages.LogTail(job.id, tuple(runfiles.tail_lines(log, LOG_LINES))))
        return posted

    def _hardware_messages(self, jobs: list[Job], daemon_running: bool) -> list:
        """The daemon's newest reading (the machine jobs are placed on); the TUI's own only where no daemon has
        recorded one: a TUI started without RLSUP_FAKE_GPUS said "no GPU found" beside jobs on fake GPUs 0 and 1."""
        now = time.monotonic()
        if now - self._hardware_at < self.hardware_every_s:
            return []
        self._hardware_at = now
        holders = gpu_holders(jobs)
        recorded = Sample.from_stored(self.store.latest_hardware_sample())
        if recorded is not None:
            return [messages.HardwareSampled(recorded, holders, "daemon" if daemon_running else "daemon stopped")]
        if self.hardware is None:
            from rlsup.hardware import Hardware

            self.hardware = Hardware()
        return [messages.HardwareSampled(self.hardware.sample(), holders, "tui")]

    def _close_store(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def close(self) -> None:
        self._close_store()
        if self._owns_hardware and self.hardware is not None:
            self.hardware.close()
            self.hardware = None


class MetricsPoller:
    """The plotted jobs' metrics, and the evaluations of the experiment under the cursor, polled on a thread
    of their own: the first read of a long run takes seconds (a million lines, about ten on a busy 2-core
    box) and must not hold up the table."""

    def __init__(self, home: Path | None = None):
        self.home = home  # the store the experiment's scheduler lines are read from (None: RLSUP_HOME's)
        self.request = PlotRequest()
        self.experiment = ExperimentRequest()
        self._posted: PlotRequest | None = None
        self._posted_experiment: tuple | None = None
        self._metrics: OrderedDict[int, JobMetrics] = OrderedDict()
        self.evaluations = ExperimentEvaluations()
        self.store: Store | None = None  # opened at the first scheduler read, kept across polls as Poller's

    def select(self, job_id: int | None, run_dir: str | None) -> None:
        """Called by the UI thread, as Poller.select."""
        self.request = self.request.selected(job_id, run_dir)

    def compare(self, curves: tuple) -> None:
        """Called by the UI thread: overlay these curves (overlay.Marks.compared), or none."""
        self.request = replace(self.request, compared=tuple(curves))

    def smooth(self, weight: float) -> None:
        """Called by the UI thread: the weight of the returns' smoothing, one of plotting.SMOOTHING_WEIGHTS."""
        self.request = replace(self.request, smoothing=weight)

    def show_experiment(self, experiment: str | None, jobs: tuple[Job, ...], *, selected: bool) -> None:
        """Called by the UI thread: read the evaluations of experiment's jobs (None: of none); selected when
        the cursor has just come to its row, not selected when only its jobs are refreshed."""
        request = self.experiment
        self.experiment = request.selected(experiment, jobs) if selected else request.followed(jobs)

    def poll(self) -> list:
        # Each request is read once: the UI thread may swap it for another while this poll reads files.
        request, experiment = self.request, self.experiment
        try:
            plotted, changed = self._read_plotted(request)
            evaluated = {job_id: metrics.evaluated for job_id, metrics in plotted.items()}
            return self._plot_messages(request, plotted, changed) + self._experiment_messages(experiment, evaluated)
        except (sqlite3.Error, OSError) as error:
            self._close_store()  # a locked or missing store: opened afresh at the next poll
            return [messages.PollFailed(f"{type(error).__name__}: {error}")]

    def _experiment_messages(self, request: ExperimentRequest, plotted: dict[int, Evaluated | None]) -> list:
        """The variant table, posted when it (or the selection) changed; the same as `rlsup status EXPERIMENT`'s."""
        if request.experiment is None:
            self.evaluations.results(request, plotted)  # lets go of the last experiment's readers
            return []
        if self.store is None:
            self.store = Store(self.home)
        scheduler = read_scheduler(request, self.store)  # first: a PBT fork's evaluations count for its lineage
        figures = ExperimentFigures(self.evaluations.results(request, plotted, scheduler), scheduler)
        posted = (request.experiment, request.selections, figures)
        if posted == self._posted_experiment:
            return []
        self._posted_experiment = posted
        return [messages.ExperimentEvaluated(request.experiment, figures)]

    def _read_plotted(self, request: PlotRequest) -> tuple[dict[int, JobMetrics], bool]:
        """The plotted jobs' metrics, each brought up to date now; whether any changed."""
        if request.job_id is None or request.run_dir is None:
            return {}, False
        runs = request.runs()
        plotted = {job_id: self._metrics_of(job_id, run_dir, len(runs)) for job_id, run_dir in runs.items()}
        changed = [metrics.update() for metrics in plotted.values()]
        return plotted, any(changed)

    def _plot_messages(self, request: PlotRequest, plotted: dict[int, JobMetrics], changed: bool) -> list:
        if not plotted or (not changed and request == self._posted):
            return []
        self._posted = request
        view = plotted[request.job_id].view(request.smoothing, compared_lines(request, self._metrics.get))
        return [messages.MetricsUpdated(request.job_id, view)]

    def _metrics_of(self, job_id: int, run_dir: str, plotted: int) -> JobMetrics:
        metrics = self._metrics.get(job_id)
        if metrics is None:
            metrics = self._metrics[job_id] = JobMetrics(run_dir)
        self._metrics.move_to_end(job_id)
        # The plotted jobs were each just moved to the end: only others are dropped.
        while len(self._metrics) > METRICS_KEPT + plotted:
            self._metrics.popitem(last=False)
        return metrics

    def _close_store(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def close(self) -> None:
        self._metrics.clear()
        self._close_store()


def poll_until_cancelled(poller: Poller | MetricsPoller, post: Callable, *, interval_s: float, wake: threading.Event,
                         cancelled: Callable[[], bool]) -> None:
    """The worker thread's loop: poll, post, sleep until the interval passes or the UI wakes it."""
    try:
        while not cancelled():
            for message in poller.poll():
                if cancelled():
                    return
                post(message)
            wake.wait(interval_s)
            wake.clear()
    finally:
        poller.close()

