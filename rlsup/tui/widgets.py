"""The TUI's widgets: plots, checkpoints, events and hardware strip (the jobs table is in jobstable.py)."""
from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from rlsup.views import plots as plotting
from rlsup.checkpoint.manifest import BEST, CheckpointEntry
from rlsup.checkpoint.choose import best_entries
from rlsup.views.colour import STATE_STYLES
from rlsup.formatting import DAY_AND_MINUTE, byte_size, clock_time, decimal, middle_cut, short_count
from rlsup.hardware import Gpu, Sample
from rlsup.jobs.state import State
from rlsup.jobs.store import Event, EventKind
from rlsup.tui.metrics import MetricsView
from rlsup.tui.logtail import WrappedLog
from rlsup.tui.rows import training_phase_speeds

EVENT_STYLES = {EventKind.STATE: "", EventKind.EDIT: "green", EventKind.REFUSED: "bold red", EventKind.INTENT: "cyan",
                EventKind.SIGNAL: "yellow", EventKind.DAEMON: "dim", EventKind.WAITING: "cyan",
                EventKind.FEATURE_OFF: "bold yellow"}
PROBLEM_WIDTH = 16  # a failed verification's reason, cut to fit the checkpoints pane
COMPACT_PROBLEM_WIDTH = 6  # the same in a compact pane: "✗ tens…"
# The Verified column has a fixed width: sized by its content, it grew or not depending on whether a
# verdict arrived before or after the rows were drawn, so the same checkpoints looked different.
CHECKPOINT_WIDTHS = {"verified": PROBLEM_WIDTH + 2}
# Under CHECKPOINTS_COMPACT_BELOW cells (the full columns take 69), times shorten and the reason is cut,
# so that Size and Verified stay in view in a 100-column terminal.
CHECKPOINTS_COMPACT_BELOW = 70
COMPACT_CHECKPOINT_WIDTHS = {"reason": 12, "verified": COMPACT_PROBLEM_WIDTH + 2}  # reason: "best -1234.5"
LEVELS = "▁▂▃▄▅▆▇█"
EVENTS_SHOWN = 1000  # the newest events of the selected job in its pane


# ---------------------------------------------------------------------------------------------
# Formatting


def state_text(state: State) -> Text:
    return Text(str(state), style=STATE_STYLES.get(state, ""))


def level_bar(percent: float | None, width: int) -> Text:
    """A load bar coloured green / yellow / red as it fills."""
    value = max(0.0, min(100.0, percent or 0.0))
    filled = round(value / 100 * width)
    style = "green" if value < 60 else "yellow" if value < 90 else "red"
    return Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")


# ---------------------------------------------------------------------------------------------
# Plots


PLOT_TITLES = {"return": "Episode return", "loss": "Loss", "speed": "Steps per second"}
Y_MARGIN = 0.05  # of the data's range, above and below: a point at the top is drawn inside the frame
TICK_SPACING = 10  # cells per step label ("32.4k" and room on both sides)
PLOT_CHROME_ROWS = 5  # a plot's rows that draw no data: title, the frame's top and bottom, tick labels, "step"
MINIMUM_DATA_ROWS = 4  # rows left to the curves, under which the legend gets no rows of its own
LEGEND_MARGIN = 14  # columns of a plot that a legend label cannot use: the y labels, the frame, its marker
LEGEND_MINIMUM = 8
Y_LABEL_WIDTH = 8  # columns left of a plot's frame: "1617.9┤" and a space


class MetricsPlot(PlotextPlot):
    """One plot of the selected job's metrics over steps; `kind` picks which. With overlays, the marked
    jobs' curves replace it while any are marked (the main screen's plot)."""

    def __init__(self, kind: str = "return", overlays: bool = True, **options):
        super().__init__(**options)
        self.kind = kind
        self.overlays = overlays
        self.view: MetricsView | None = None
        self.drawn: list[tuple[str | None, tuple, tuple]] = []  # (legend label, steps, values) of the last draw

    def show(self, view: MetricsView | None) -> None:
        self.view = view
        self._draw()

    def show_kind(self, kind: str) -> None:
        self.kind = kind
        self._draw()

    def _draw(self) -> None:
        plot = self.plt
        plot.clear_data()
        plot.clear_figure()
        plot.xlabel("step")
        compared = self.view.compared_lines(self.kind) if self.view is not None and self.overlays else ()
        series = plotting.terminal_lines(compared) if compared else self._job_series()
        self.drawn = [(label, xs, ys) for xs, ys, label, _, _ in series]
        legend_width = max(LEGEND_MINIMUM, self.size.width - LEGEND_MARGIN)
        for xs, ys, label, color, marker in series:
            label = middle_cut(label, legend_width) if label else label  # a longer one left no legend at all
            if marker == "◆":  # a few points far apart: a braille dot would vanish
                plot.scatter(xs, ys, label=label, color=color, marker=marker)
            else:
                plot.plot(xs, ys, label=label, color=color, marker=marker)
        if series:
            self._frame(series)
        plot.title(self._title(drawn=bool(series)))
        self.refresh()

    def on_resize(self) -> None:
        if self.view is not None:
            self._draw()  # the legend's room and the step ticks depend on the size

    def legend_room(self, low: float, top: float, legend_rows: int) -> float:
        """The axis top that leaves the plot's first legend_rows rows free of data, for the legend plotext draws
        there: over the curves, it hid a run that started high. No room is kept in a plot too short for it."""
        rows = self.size.height - PLOT_CHROME_ROWS
        if not legend_rows or rows < legend_rows + MINIMUM_DATA_ROWS:
            return top
        # The data's own margin (Y_MARGIN) keeps its highest dot under the legend's last row.
        return top + (top - low) * legend_rows / (rows - legend_rows)

    def _frame(self, series: list) -> None:
        """Limits around every point, with a margin above and below, and step ticks that fit the width."""
        xs = [x for points, _, _, _, _ in series for x in points]
        ys = [y for _, values, _, _, _ in series for y in values]
        low, high = min(ys), max(ys)
        margin = (high - low) * Y_MARGIN or abs(high) * Y_MARGIN or 1.0  # a flat line still gets a band
        # A margin that made the axis start below zero labelled a never-negative return with "-15.6".
        bottom = low - margin if low < 0 else max(0.0, low - margin)
        legend_rows = sum(1 for _, _, label, _, _ in series if label)
        self.plt.ylim(bottom, self.legend_room(bottom, high + margin, legend_rows))
        if min(xs) < max(xs):
            self.plt.xlim(min(xs), max(xs))
        self._step_ticks(max(xs))

    def _title(self, drawn: bool) -> str:
        title = PLOT_TITLES[self.kind]
        if self.view is None:
            return f"{title}: {'no job selected' if self.app.selected_job_id is None else 'reading metrics…'}"
        if self.kind == "return":
            title += f" · {plotting.smoothing_label(self.view.smoothing)}"
            # plotext drops a title wider than the plot beside its y labels: at a third of 100 columns.
            if len(title) > self.size.width - Y_LABEL_WIDTH:
                title = title.replace(PLOT_TITLES["return"], "Return")
        return title if drawn else f"{title}: nothing recorded yet"

    def _job_series(self) -> list:
        """(steps, values, label, colour, marker) of the selected job's lines that have points."""
        return [(xs, ys, label, color, "◆" if label == "evaluation" else "braille")
                for (xs, ys), label, color in self._series() if xs]

    def _series(self) -> list:
        view = self.view
        if view is None:
            return []
        if self.kind == "return":
            return [(view.episode_return, "episodes", "gray"), (view.smoothed_return, "smoothed", "cyan+"),
                    (view.evaluation, "evaluation", "orange+")]
        if self.kind == "loss":
            return [(view.loss, view.loss_name, "magenta+")]
        xs, speeds = view.steps_per_second
        return [((xs, training_phase_speeds(speeds)), "steps/s", "green+")]

    def _step_ticks(self, last_step: float) -> None:
        # Five ticks in a third of a 100-column screen ran their labels together ("10.8k21.6k").
        count = max(2, min(5, self.size.width // TICK_SPACING))
        ticks = [last_step * index / (count - 1) for index in range(count)]
        self.plt.xticks(ticks, [short_count(tick) for tick in ticks])


# ---------------------------------------------------------------------------------------------
# Checkpoints, events, log


class CheckpointsTable(DataTable):
    """The selected job's checkpoints, newest first, with a verification mark filled in as checks finish."""

    COLUMNS = (("step", "Step"), ("newest", ""), ("time", "Time"), ("reason", "Reason"), ("size", "Size"),
               ("verified", "Verified"))

    def __init__(self, **options):
        super().__init__(cursor_type="row", show_cursor=False, **options)
        self.compact = False
        self.shown: tuple[tuple[CheckpointEntry, ...], dict[str, str | None]] = ((), {})

    def on_mount(self) -> None:
        self.ensure_columns()

    def ensure_columns(self) -> None:
        if not self.columns:
            widths = COMPACT_CHECKPOINT_WIDTHS if self.compact else CHECKPOINT_WIDTHS
            for key, label in self.COLUMNS:
                self.add_column(label, key=key, width=widths.get(key))

    def on_resize(self) -> None:
        compact = self.size.width < CHECKPOINTS_COMPACT_BELOW
        if compact != self.compact:
            self.compact = compact
            self.clear(columns=True)
            self.show(*self.shown)

    @property
    def problem_width(self) -> int:
        return COMPACT_PROBLEM_WIDTH if self.compact else PROBLEM_WIDTH

    def stamp(self, time: float, entries: tuple[CheckpointEntry, ...]) -> str:
        """Month, day and minute; when compact, as `ls -l` does: the minute on the newest checkpoint's day,
        the date before it (deterministic, unlike a comparison with today)."""
        if not self.compact:
            return clock_time(time, DAY_AND_MINUTE)
        newest_day = clock_time(max(entry.time for entry in entries), "%Y-%m-%d")
        return clock_time(time, "%H:%M" if clock_time(time, "%Y-%m-%d") == newest_day else "%m-%d")

    def show(self, entries: tuple[CheckpointEntry, ...], verified: dict[str, str | None]) -> None:
        self.shown = (entries, verified)
        self.ensure_columns()
        self.clear()
        resumable = [entry for entry in entries if entry.reason != BEST]
        newest = resumable[-1].path if resumable else None
        bests = best_entries(list(entries))
        best = bests[0].path if bests else None
        for entry in reversed(entries):
            path = str(entry.path)
            self.add_row(Text(short_count(entry.step), justify="right"), checkpoint_mark(entry.path, newest, best),
                         self.stamp(entry.time, entries),
                         Text(checkpoint_reason(entry), style="yellow" if entry.env_restarts else ""),
                         Text(byte_size(entry.bytes), justify="right"),
                         verified_mark(path, verified, self.problem_width), key=path)

    def mark(self, path: str, verified: dict[str, str | None]) -> None:
        if path in (row.key.value for row in self.ordered_rows):
            self.update_cell(path, "verified", verified_mark(path, verified, self.problem_width))


def checkpoint_reason(entry: CheckpointEntry) -> str:
    """The reason in the pane: a best checkpoint as "best 487.3", which fits the column whole where
    "best (eval 487.25)" (`rlsup checkpoints`' label) read "best (ev"."""
    mean = entry.evaluation_mean
    if entry.reason != BEST or mean is None:
        return entry.label
    return entry.label.replace(f"best (eval {mean:g})", f"best {decimal(mean, 1)}")


def checkpoint_mark(path: Path, newest: Path | None, best: Path | None) -> Text | str:
    """"newest" on the checkpoint a resume starts from, "★ best" on the one `enjoy --checkpoint best` plays."""
    if path == newest:
        return Text("newest", style="bold")
    if path == best:
        return Text("★ best", style="bold yellow")
    return ""


def verified_mark(path: str, verified: dict[str, str | None], problem_width: int = PROBLEM_WIDTH) -> Text:
    if path not in verified:
        return Text("checking", style="dim")
    problem = verified[path]
    if problem is None:
        return Text("✓ ok", style="green")
    short = problem if len(problem) <= problem_width else problem[:problem_width - 1] + "…"
    return Text(f"✗ {short}", style="bold red")


def event_row(event: Event) -> Table:
    """An event's time, and beside it what happened, wrapped under itself: a wrapped line that began at the
    left edge ran its last word into the first word of the next line for anyone reading the pane as text."""
    row = Table.grid(padding=(0, 1))
    row.add_column(no_wrap=True, style="dim")
    row.add_column(overflow="fold")
    row.add_row(clock_time(event.time), event_text(event))
    return row


def event_text(event: Event) -> Text:
    if event.kind is EventKind.STATE:
        text = Text(f"{event.from_state or '·'} → ", style="dim")
        text.append_text(state_text(State(event.to_state)) if event.to_state in State._value2member_map_
                         else Text(str(event.to_state)))
        text.append(" ")
    else:
        text = Text(f"{event.kind} ", style=EVENT_STYLES.get(event.kind, "") or "bold")
    text.append(event.message, style="red" if event.kind is EventKind.REFUSED else "")
    return text


class EventsLog(WrappedLog):
    """State changes, intents, and applied or refused edits of the selected job."""

    def __init__(self, **options):
        super().__init__(max_lines=EVENTS_SHOWN, **options)
        self.job_id: int | None = None
        self.shown: list[Event] = []

    def draw(self, event: Event) -> Table:
        return event_row(event)

    def load(self, job_id: int | None, events: tuple[Event, ...]) -> None:
        self.start_over()
        self.job_id, self.shown = job_id, []
        self.append(events)

    def append(self, events: tuple[Event, ...]) -> None:
        newest = self.shown[-1].id if self.shown else 0
        # The history of a newly selected job and the live feed overlap: ids tell them apart.
        new = [event for event in events if event.job_id == self.job_id and event.id > newest]
        self.shown = (self.shown + new)[-EVENTS_SHOWN:]
        self.added(len(new))


# ---------------------------------------------------------------------------------------------
# Hardware strip and daemon banner


# Whose reading the strip shows: the running daemon's (the GPUs jobs are placed on, RLSUP_FAKE_GPUS's where it was
# started with them), the stopped daemon's last, or the TUI's own where no daemon ever recorded one.
READ_BY = {"daemon": "the daemon", "daemon stopped": "the daemon", "tui": "NVML"}


class HardwareStrip(Static):
    """CPU per core, RAM, and each GPU with the job holding it."""

    def show(self, sample: Sample, holders: dict[int, str], read_by: str = "tui") -> None:
        self.update(hardware_text(sample, holders, read_by))


def hardware_text(sample: Sample, holders: dict[int, str], read_by: str = "tui") -> Text:
    cores = sample.cpu_percent
    average = sum(cores) / len(cores) if cores else 0.0
    text = Text("CPU ", style="bold") + Text(f"{average:3.0f}% ")
    for percent in cores:
        style = "green" if percent < 60 else "yellow" if percent < 90 else "red"
        text.append(LEVELS[min(len(LEVELS) - 1, int(percent / 100 * len(LEVELS)))], style=style)
    used, total = sample.memory_used_bytes, sample.memory_total_bytes
    text.append("   RAM ", style="bold")
    text.append_text(level_bar(100 * used / total if total else 0, 10))
    text.append(f" {byte_size(used)} / {byte_size(total)}")
    if read_by == "daemon stopped":
        text.append(f"   the daemon's last reading, at {clock_time(sample.time)}", style="dim")
    if not sample.gpus:
        text.append("\nGPU ", style="bold")
        text.append(f"no GPU found ({READ_BY.get(read_by, 'NVML')} sees none): jobs run on CPU", style="dim")
    for gpu in sample.gpus:
        text.append("\n")
        text.append_text(gpu_text(gpu, holders.get(gpu.index)))
    return text


def gpu_text(gpu: Gpu, holder: str | None) -> Text:
    text = Text(f"GPU{gpu.index} ", style="bold") + Text(f"{gpu.name[:18]:<18} ", style="dim")
    text.append_text(level_bar(gpu.utilization_percent, 10))
    text.append(f" {gpu.utilization_percent:3.0f}%" if gpu.utilization_percent is not None else "   –")
    if gpu.memory_total_bytes:
        text.append(f"  mem {byte_size(gpu.memory_used_bytes or 0)} / {byte_size(gpu.memory_total_bytes)}")
    text.append(f"  {gpu.temperature_c:.0f}°C" if gpu.temperature_c is not None else "  –°C")
    text.append(f"  {gpu.power_w:.0f} W" if gpu.power_w is not None else "  – W")
    text.append("  → ", style="dim")
    text.append(holder or "free", style="bold cyan" if holder else "dim")
    return text


class DaemonBanner(Static):
    """Says when the daemon is down, and how to start it."""

    def show(self, running: bool) -> None:
        self.set_class(not running, "-down")
        self.update("" if running else "The daemon is not running: queued jobs wait and nothing is supervised. "
                                       "Press D to start it.")
