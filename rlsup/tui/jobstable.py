"""The jobs table: one row per job, redrawn cell by cell, its columns fitted to the width it has."""
from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from rlsup.formatting import decimal, duration, short_count, speed
from rlsup.jobstate import State
from rlsup.jobview import JobRow, job_label
from rlsup.tui.widgets import state_text

BAR_WIDTH = 10
COMPACT_BAR_WIDTH = 5
COMPACT_BELOW = 120  # table columns under which the progress bar shrinks: at 100 the full bar left no room
WAITING_WIDTH = 32  # a queued job's reason in the state cell; the detail screen and events give it whole
EIGHTHS = " ▏▎▍▌▋▊▉█"
JOB_COLUMNS = (("mark", ""), ("id", "ID"), ("name", "Name"), ("algo", "Algo"), ("env", "Env"), ("state", "State"),
               ("progress", "Step / total"), ("speed", "Steps/s"), ("return", "Return"), ("eta", "ETA"),
               ("gpu", "GPU"))
# The text columns that give up width, cut with "…", when every column cannot fit: the numbers stay whole.
SQUEEZABLE = ("name", "env", "state")
SQUEEZED_MINIMUM = 7  # "running" whole, and enough of a name to tell jobs apart
MARK = Text("●", style="bold cyan")  # a row marked with space: its curve is overlaid in the plot


def progress(step: int, total: int, bar_width: int = BAR_WIDTH) -> Text:
    """A bar in eighths of a cell followed by "step/total"."""
    fraction = min(1.0, step / total) if total > 0 else 0.0
    eighths = round(fraction * bar_width * 8)
    bar = "█" * (eighths // 8) + (EIGHTHS[eighths % 8] if eighths % 8 else "")
    text = Text(bar.ljust(bar_width), style="green" if fraction >= 1 else "cyan")
    text.append(f" {short_count(step)}/{short_count(total)}")
    return text


def width(cell: Text | str) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(cell)


def cut(text: str) -> Text:
    """Text that ends in "…" where its column is narrower than it (a name is never read as markup)."""
    return Text(text, no_wrap=True, overflow="ellipsis")


def job_cells(row: JobRow, bar_width: int = BAR_WIDTH, marked: bool = False) -> tuple:
    job = row.job
    return (MARK if marked else "", Text(job_label(job), justify="right"), cut(job.name), job.algo, cut(job.env), state_cell(row),
            progress(row.step, job.total_steps, bar_width),
            Text(speed(row.steps_per_second), justify="right"), Text(decimal(row.mean_return, 1), justify="right"),
            Text(duration(row.eta_s), justify="right"), job.gpus.replace(",", " ") or "–")


def state_cell(row: JobRow) -> Text:
    """The state, why a queued job waits ("queued: needs 1 GPU"), and a refused edit the file still holds;
    a foreground run says it is one: the daemon does not manage it."""
    text = state_text(row.job.state)
    text.no_wrap, text.overflow = True, "ellipsis"
    if row.foreground:
        text.append(" foreground", style="bold magenta")
    if row.job.state is State.QUEUED and row.job.reason:
        text.append(f": {waiting_summary(row.job.reason)}", style="dim")
    if row.drift:
        text.append(f" ⚠ {row.drift}", style="bold yellow")
    return text


def waiting_summary(reason: str) -> str:
    """A reason's first clause: "needs 1 GPU; this machine has 0 (set …)" -> "needs 1 GPU"."""
    clause = reason.splitlines()[0].split(";")[0].split(" (")[0].strip()
    return clause if len(clause) <= WAITING_WIDTH else clause[:WAITING_WIDTH - 1] + "…"


def share_out(wanted: dict[str, int], room: int, minimum: int) -> dict[str, int]:
    """Widths for columns that want `wanted` in `room` cells: the narrowest get what they want, the rest
    split what is left evenly, none under minimum (water-filling, so one long name cannot starve the rest)."""
    widths = {}
    narrowest_first = sorted(wanted, key=lambda key: wanted[key])
    for index, key in enumerate(narrowest_first):
        share = room // (len(narrowest_first) - index)
        widths[key] = max(minimum, min(wanted[key], share))
        room -= widths[key]
    return {key: widths[key] for key in wanted}


class JobsTable(DataTable):
    """Every job, one row each; a refresh redraws only the cells whose text changed.

    Its columns fit its width: under COMPACT_BELOW the bar shrinks, and when the cells still do not fit,
    the name, env and state columns get fixed widths that share out the room left by the numbers.
    """

    BINDINGS = [Binding("enter", "select_cursor", "Details")]

    def __init__(self, **options):
        super().__init__(cursor_type="row", zebra_stripes=True, **options)
        self.rows_shown: dict[int, JobRow] = {}
        self.cells_shown: dict[int, tuple] = {}
        self.bar_width = BAR_WIDTH
        self.squeezed: dict[str, int] = {}  # fixed widths of the squeezed columns; empty while all fit
        self.marked: frozenset[str] = frozenset()  # row keys marked with space (overlay.Marks)

    def on_mount(self) -> None:
        self.ensure_columns()

    def ensure_columns(self) -> None:
        # The first poll's rows may arrive before this table is mounted.
        if not self.columns:
            for key, label in JOB_COLUMNS:
                self.add_column(label, key=key, width=1 if key == "mark" else self.squeezed.get(key))

    @property
    def selected_job_id(self) -> int | None:
        if not self.row_count:
            return None
        return int(self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value)

    def show_rows(self, rows: tuple[JobRow, ...], name_filter: str = "") -> None:
        """Show rows (already in order) whose name contains name_filter, keeping the cursor's job."""
        self.ensure_columns()
        wanted = name_filter.strip().lower()
        visible = [row for row in rows if wanted in row.job.name.lower()]
        selected = self.selected_job_id
        visible_ids = [row.job.id for row in visible]
        for job_id in set(self.rows_shown) - set(visible_ids):
            self.remove_row(str(job_id))
            del self.rows_shown[job_id], self.cells_shown[job_id]
        widest: dict[str, tuple[int, str, object]] = {}
        for row in visible:
            self._show_row(row, widest)
        # Widen each column once, for its widest new cell: a width check on any narrower cell would
        # re-measure the whole column, once per cell updated.
        for column, (_, row_key, cell) in widest.items():
            self.update_cell(row_key, column, cell, update_width=True)
        self._order(visible_ids, selected)
        self.fit()

    def _show_row(self, row: JobRow, widest: dict) -> None:
        job_id = row.job.id
        if self.rows_shown.get(job_id) == row:
            return
        self.rows_shown[job_id] = row
        cells = job_cells(row, self.bar_width, str(job_id) in self.marked)
        old = self.cells_shown.get(job_id)
        self.cells_shown[job_id] = cells
        if old is None:
            self.add_row(*cells, key=str(job_id))
            return
        for (column, _), before, after in zip(JOB_COLUMNS, old, cells):
            if before != after:
                self.update_cell(str(job_id), column, after)
                cell_width = width(after)
                if cell_width > max(self.columns[column].content_width, widest.get(column, (0,))[0]):
                    widest[column] = (cell_width, str(job_id), after)

    def show_marks(self, keys: frozenset[str]) -> None:
        """Mark the rows whose keys are in keys, unmark the others."""
        changed, self.marked = self.marked ^ keys, keys
        for job_id, row in self.rows_shown.items():
            if str(job_id) in changed:
                self.cells_shown[job_id] = job_cells(row, self.bar_width, str(job_id) in keys)
                self.update_cell(str(job_id), "mark", self.cells_shown[job_id][0])

    def _order(self, job_ids: list[int], selected: int | None) -> None:
        # Rebuilt in order rather than sorted by the ID column: a foreground run's ID cell says "fg".
        if [int(row.key.value) for row in self.ordered_rows] != job_ids:
            self._rebuild(job_ids, selected)

    # -- fitting the width -------------------------------------------------------------------

    def on_resize(self) -> None:
        self.fit()

    def fit(self) -> None:
        """Pick the bar and the squeezed widths for the current width; rebuild the table when they change."""
        if not self.size.width:
            return  # not laid out yet: the first resize fits it
        bar_width = COMPACT_BAR_WIDTH if self.size.width < COMPACT_BELOW else BAR_WIDTH
        rebuild = bar_width != self.bar_width
        if rebuild:
            self.bar_width = bar_width
            self.cells_shown = {job_id: job_cells(row, bar_width, str(job_id) in self.marked)
                                for job_id, row in self.rows_shown.items()}
        squeezed = self._squeeze()
        if rebuild or squeezed != self.squeezed:
            self.squeezed = squeezed
            self._rebuild()

    def _squeeze(self) -> dict[str, int]:
        natural = {key: cell_len(label) for key, label in JOB_COLUMNS}
        for cells in self.cells_shown.values():
            for (key, _), cell in zip(JOB_COLUMNS, cells):
                natural[key] = max(natural[key], width(cell))
        room = self.scrollable_content_region.width - 2 * self.cell_padding * len(natural)
        if sum(natural.values()) <= room:
            return {}
        numbers = sum(cell_width for key, cell_width in natural.items() if key not in SQUEEZABLE)
        return share_out({key: natural[key] for key in SQUEEZABLE}, room - numbers, SQUEEZED_MINIMUM)

    def _rebuild(self, order: list[int] | None = None, selected: int | None = None) -> None:
        """The rows in order (default: as they are) under columns of the current widths (a DataTable cannot
        change a column's width in place); the cursor stays on the selected job."""
        if order is None:
            order, selected = [int(row.key.value) for row in self.ordered_rows], self.selected_job_id
        self.clear(columns=True)
        self.ensure_columns()
        for job_id in order:
            self.add_row(*self.cells_shown[job_id], key=str(job_id))
        if selected in order:
            self.move_cursor(row=order.index(selected), animate=False)
