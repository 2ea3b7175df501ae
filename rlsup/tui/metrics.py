"""One run's metrics as the TUI's plots draw them: metrics.jsonl read incrementally into downsampled series."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlsup.views import plots as plotting
from rlsup.run import files as runfiles
from rlsup.run import metrics as metrics_format
from rlsup.spec import registry
from rlsup.formatting import number as _number
from rlsup.views.groups import Evaluated
from rlsup.tui.downsampling import PLOT_BUCKETS, Downsampler, SmoothedSeries
from rlsup.tui.experiment import evaluated_after
from rlsup.tui.rows import training_phase_speeds

Series = tuple[tuple[float, ...], tuple[float, ...]]
Compared = tuple[tuple[str, tuple[plotting.Line, ...]], ...]


@dataclass(frozen=True)
class MetricsView:
    """What the plots draw for the selected job, already downsampled; with jobs marked, `compared` holds
    the lines each plot kind overlays instead, one per marked job or group and one for the selected job."""

    episode_return: Series
    smoothed_return: Series
    evaluation: Series
    loss: Series
    loss_name: str
    steps_per_second: Series
    records: int
    last_step: int
    smoothing: float = plotting.DEFAULT_SMOOTHING
    compared: Compared = ()

    def compared_lines(self, kind: str) -> tuple[plotting.Line, ...]:
        return dict(self.compared).get(kind, ())


class JobMetrics:
    """A run's metrics.jsonl read incrementally (from the last offset) into downsampled series."""

    def __init__(self, run_dir: str | Path, capacity: int = PLOT_BUCKETS):
        self.reader = runfiles.MetricsReader(Path(run_dir))
        self.capacity = capacity
        self._start_over()

    def _start_over(self) -> None:
        self.returns, self.evaluation = Downsampler(self.capacity), Downsampler(self.capacity)
        self.smoothed = SmoothedSeries(self.capacity)
        self.loss, self.speed = Downsampler(self.capacity), Downsampler(self.capacity)
        self.loss_name = "loss"
        self.records = 0
        self.last_step = 0
        self.evaluated: Evaluated | None = None  # the last and best evaluation, for the experiment pane

    def update(self) -> bool:
        """Read what was appended; True when anything changed."""
        records = self.reader.read_new()
        restarted = self.reader.restarted
        if restarted:
            # A resume cut the file back to its checkpoint: read_new has just returned it from the start.
            self.reader.restarted = False
            self._start_over()
        for record in records:
            self._add(record)
        self.evaluated = evaluated_after(self.evaluated, records)
        return bool(records) or restarted

    def _add(self, record: dict) -> None:
        self.records += 1
        step = record.get(metrics_format.STEP)
        if isinstance(step, (int, float)):
            self.last_step = max(self.last_step, int(step))
        x = float(self.last_step)
        kind = record.get(metrics_format.KIND)
        if kind == metrics_format.EPISODE:
            value = _number(record.get(metrics_format.EPISODE_RETURN))
            if value is not None:
                self.returns.add(x, value)
                self.smoothed.add(x, value)
        elif kind == metrics_format.EVAL:
            value = _number(record.get(metrics_format.EVAL_MEAN))
            if value is not None:
                self.evaluation.add(x, value)
        elif kind == metrics_format.TRAIN:
            self._add_train(x, record)

    def _add_train(self, x: float, record: dict) -> None:
        # Each algorithm names its loss in the registry (DQN "loss", V-trace "total_loss"); the record has one.
        for name in registry.loss_metric_names():
            value = _number(record.get(name))
            if value is not None:
                self.loss_name = name
                self.loss.add(x, value)
                break
        speed = _number(record.get("steps_per_second"))
        if speed is not None:
            self.speed.add(x, speed)

    def view(self, smoothing: float = plotting.DEFAULT_SMOOTHING, compared: Compared = ()) -> MetricsView:
        return MetricsView(episode_return=self.returns.envelope(),
                           smoothed_return=self.smoothed.means(smoothing) if smoothing > 0 else ((), ()),
                           evaluation=self.evaluation.means(), loss=self.loss.envelope(),
                           loss_name=self.loss_name, steps_per_second=self.speed.means(),
                           records=self.records, last_step=self.last_step, smoothing=smoothing, compared=compared)

    def series(self, kind: str, smoothing: float) -> plotting.Series:
        """One line of a plot kind for an overlay: returns smoothed by the weight, loss and speed as bucket means."""
        if kind == "return":
            steps, values = self.smoothed.means(smoothing)
        elif kind == "loss":
            steps, values = self.loss.means()
        else:
            steps, speeds = self.speed.means()
            values = training_phase_speeds(speeds)
        return plotting.Series(self.loss_name if kind == "loss" else kind, steps, values)
