"""The jobs table: one row per job or experiment, redrawn cell by cell, its columns fitted to the width it has."""
from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from rlsup.formatting import decimal, duration, middle_cut, printable, printable_lines, short_count, speed
from rlsup.views.groups import GroupRow, grouped
from rlsup.views.jobs import JobRow, job_label, waiting_words, where
from rlsup.tui.overlay import experiment_of_key, group_key
from rlsup.tui.widgets import state_text

BAR_WIDTH = 10
COMPACT_BAR_WIDTH = 5
COMPACT_BELOW = 120  # table columns under which the progress bar shrinks: at 100 the full bar left no room
EIGHTHS = " ▏▎▍▌▋▊▉█"
JOB_COLUMNS = (("mark", ""), ("id", "ID"), ("name", "Name"), ("algo", "Algo"), ("env", "Env"), ("state", "State"),
               ("progress", "Step / total"), ("speed", "Steps/s"), ("return", "Return"), ("eta", "ETA"),
               ("gpu", "GPU"))
# The text columns that give up width, cut with "…", when every column cannot fit: the numbers stay whole.
SQUEEZABLE = ("name", "env", "state")
SQUEEZED_MINIMUM = 7  # "running" whole, and enough of a name to tell jobs apart
# The state keeps this much before the name and env give up more ("queued for 1 free GPU(s)"): why a job
# waits reads only there, while a name cut in its middle still tells jobs apart (issue 50 item 10).
STATE_KEPT = 24
# Of those, the columns cut in the middle (formatting.middle_cut): a sweep's variants and an env's version
# differ at their end. A state is cut at its end: its first word is what it is.
MIDDLE_CUT = ("name", "env")
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
    """Text that ends in "…" where its column is narrower than it (a name is never read as markup, nor acted on
    by the terminal: it is a job's data)."""
    return Text(printable(text), no_wrap=True, overflow="ellipsis")


def job_cells(row: JobRow, bar_width: int = BAR_WIDTH, indent: str = "", marked: bool = False) -> tuple:
    job = row.job
    return (MARK if marked else "", Text(job_label(job), justify="right"), cut(indent + job.name), job.algo,
            cut(job.env), state_cell(row),
            progress(row.step, job.total_steps, bar_width),
            Text(speed(row.steps_per_second), justify="right"), Text(decimal(row.mean_return, 1), justify="right"),
            Text(duration(row.eta_s), justify="right"), where(job, gpu_label="", separator=" ", blank="–"))


MEMBER_INDENT = "  "


def group_cells(group: GroupRow, opened: bool, bar_width: int = BAR_WIDTH, marked: bool = False) -> tuple:
    """An experiment's row: its state counts, summed progress and speed, mean ± std return, ETA."""
    speeds = [row.steps_per_second for row in group.rows if row.steps_per_second is not None]
    algos = ",".join(sorted({row.job.algo for row in group.rows}))
    envs = ",".join(sorted({row.job.env for row in group.rows}))
    name = cut(f"{group.experiment} ({len(group.rows)} jobs)")
    return (MARK if marked else "", Text("▾" if opened else "▸", justify="right"), name, algos, cut(envs),
            Text(group.counts, style="bold", no_wrap=True, overflow="ellipsis"),
            progress(group.step, group.total_steps, bar_width),
            Text(speed(sum(speeds) if speeds else None), justify="right"),
            Text(group.return_text, justify="right"), Text(duration(group.eta_s), justify="right"), "–")


def state_cell(row: JobRow) -> Text:
    """The state, why a queued job waits ("queued: needs 1 GPU"), and a refused edit the file still holds;
    a foreground run says it is one: the daemon does not manage it."""
    text = state_text(row.job.state)
    text.no_wrap, text.overflow = True, "ellipsis"
    if row.foreground:
        text.append(" foreground", style="bold magenta")
    text.append(printable(waiting_words(row.job)), style="dim")
    if row.drift:
        text.append(f" ⚠ {printable_lines(row.drift)}", style="bold yellow")
    return text


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


def squeezed_widths(wanted: dict[str, int], room: int) -> dict[str, int]:
    """The squeezable columns' widths in room: shared out, the state keeping up to STATE_KEPT cells."""
    widths = share_out(wanted, room, SQUEEZED_MINIMUM)
    kept = min(wanted["state"], STATE_KEPT)
    if widths["state"] >= kept:
        return widths
    others = {key: cells for key, cells in wanted.items() if key != "state"}
    return share_out(others, room - kept, SQUEEZED_MINIMUM) | {"state": kept}


class JobsTable(DataTable):
    """Every lone job, and each experiment as a group row that opens (right, enter) and closes (left) on its jobs;
    a refresh redraws only the cells whose text changed.

    Job rows are keyed by their job id and group rows by group_key(experiment). Its columns fit its width:
    under COMPACT_BELOW the bar shrinks, and when the cells still do not fit, the name, env and state
    columns get fixed widths that share out the room left by the numbers.
    """

    BINDINGS = [Binding("enter", "select_cursor", "Details"), Binding("right", "open_group", "Open", show=False),
                Binding("left", "close_group", "Close", show=False)]

    def __init__(self, **options):
        super().__init__(cursor_type="row", zebra_stripes=True, **options)
        self.rows_shown: dict[int, JobRow] = {}      # the job rows on screen
        self.groups_shown: dict[str, GroupRow] = {}  # the group rows on screen, by experiment
        self.opened: set[str] = set()                # experiments whose jobs are shown under them
        self.cells_shown: dict[str, tuple] = {}      # by row key
        self.values_shown: dict[str, object] = {}    # what each row's cells were made from
        self.last_rows: tuple[JobRow, ...] = ()
        self.last_filter = ""
        self.bar_width = BAR_WIDTH
        self.squeezed: dict[str, int] = {}  # fixed widths of the squeezed columns; empty while all fit
        self.marked: frozenset[str] = frozenset()  # row keys marked with space (overlay.Marks)
        # The keys of the rows the filter passes, a closed group's jobs included: a marked row not among them
        # is hidden by the filter, not by a closed group.
        self.keys_passing_filter: frozenset[str] = frozenset()

    def on_mount(self) -> None:
        self.ensure_columns()

    def ensure_columns(self) -> None:
        # The first poll's rows may arrive before this table is mounted.
        if not self.columns:
            for key, label in JOB_COLUMNS:
                self.add_column(label, key=key, width=1 if key == "mark" else self.squeezed.get(key))

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    @property
    def selected_job_id(self) -> int | None:
        """The job under the cursor; a group row's first job."""
        key = self.selected_key
        if key is None:
            return None
        ids = self.group_job_ids(key)
        return ids[0] if ids else None

    @property
    def selected_experiment(self) -> str | None:
        """The experiment whose group row is under the cursor; None on a job row."""
        return experiment_of_key(self.selected_key)

    def group_job_ids(self, key: str) -> tuple[int, ...]:
        """The job ids a row stands for: a group row's, all of its experiment's jobs; a job row's, its own."""
        experiment = experiment_of_key(key)
        if experiment is None:
            return (int(key),)
        group = self.groups_shown.get(experiment)
        return group.job_ids if group else ()

    def show_rows(self, rows: tuple[JobRow, ...], name_filter: str = "") -> None:
        """Show rows (already in order) whose name, or experiment's name, contains name_filter, keeping the
        cursor's row."""
        self.ensure_columns()
        self.last_rows, self.last_filter = rows, name_filter
        wanted = name_filter.strip().lower()
        visible = [row for row in rows if wanted in row.job.name.lower() or wanted in row.job.experiment.lower()]
        entries = self._entries(visible)
        self.keys_passing_filter = frozenset(str(row.job.id) for row in visible) | frozenset(
            key for key, _ in entries)
        selected = self.selected_key
        keys = [key for key, _ in entries]
        for key in set(self.cells_shown) - set(keys):
            self.remove_row(key)
            del self.cells_shown[key], self.values_shown[key]
        shown_rows = [row for _, (row, _) in entries]
        self.rows_shown = {row.job.id: row for row in shown_rows if isinstance(row, JobRow)}
        self.groups_shown = {group.experiment: group for group in shown_rows if isinstance(group, GroupRow)}
        widest: dict[str, tuple[int, str, object]] = {}
        for key, value in entries:
            self._show_row(key, value, widest)
        # Widen each column once, for its widest new cell: a width check on any narrower cell would
        # re-measure the whole column, once per cell updated.
        for column, (cell_width, row_key, cell) in widest.items():
            self.update_cell(row_key, column, cell, update_width=True)
            self._widen_now(column, cell_width)
        self._order(keys, selected)
        self.fit()

    def _entries(self, rows: list[JobRow]) -> list[tuple[str, tuple]]:
        """(row key, what its cells are made of) in order: lone jobs, and groups with their opened jobs."""
        entries: list[tuple[str, tuple]] = []
        for entry in grouped(rows):
            if isinstance(entry, JobRow):
                entries.append((str(entry.job.id), (entry, "")))
                continue
            opened = entry.experiment in self.opened
            entries.append((group_key(entry.experiment), (entry, opened)))
            if opened:
                entries.extend((str(row.job.id), (row, MEMBER_INDENT)) for row in entry.rows)
        return entries

    def _cells(self, key: str, value: tuple) -> tuple:
        row, detail = value
        if isinstance(row, GroupRow):
            return group_cells(row, detail, self.bar_width, key in self.marked)
        return job_cells(row, self.bar_width, detail, key in self.marked)

    def _show_row(self, key: str, value: tuple, widest: dict) -> None:
        if self.values_shown.get(key) == value:
            return
        self.values_shown[key] = value
        cells = self._cells(key, value)
        old = self.cells_shown.get(key)
        self.cells_shown[key] = cells
        if old is None:
            self.add_row(*self._fitted(cells), key=key)
        for (column, _), before, after, fitted in zip(JOB_COLUMNS, old or (None,) * len(cells), cells,
                                                      self._fitted(cells)):
            if before != after:
                if old is not None:
                    self.update_cell(key, column, fitted)
                cell_width = width(fitted)
                if cell_width > max(self.columns[column].content_width, widest.get(column, (0,))[0]):
                    widest[column] = (cell_width, key, fitted)

    def _widen_now(self, column: str, cell_width: int) -> None:
        """Widen an auto-width column for a cell now: Textual measures added rows and updated cells on its next
        idle, and a frame drawn before it cut them to the column's old width, a rebuilt table's to its header's
        ("11k/120k" as "1", and the return and ETA, after opening a group: issue 50 item 7)."""
        column_shown = self.columns[column]
        if column_shown.auto_width:
            column_shown.content_width = max(column_shown.content_width, cell_width)

    def show_marks(self, keys: frozenset[str]) -> None:
        """Mark the rows (job or group) whose keys are in keys, unmark the others."""
        changed, self.marked = self.marked ^ keys, keys
        for key, value in self.values_shown.items():
            if key in changed:
                self.cells_shown[key] = self._cells(key, value)
                self.update_cell(key, "mark", self.cells_shown[key][0])

    def _order(self, keys: list[str], selected: str | None) -> None:
        # Rebuilt in order rather than sorted by the ID column: a foreground run's ID cell says "fg".
        if [row.key.value for row in self.ordered_rows] != keys:
            self._rebuild(keys, selected)

    # -- opening and closing groups ------------------------------------------------------------

    def action_select_cursor(self) -> None:
        """Enter opens or closes a group row; on a job row it opens the job's details."""
        experiment = self.selected_experiment
        if experiment is None:
            super().action_select_cursor()
        else:
            self.set_opened(experiment, experiment not in self.opened)

    def action_open_group(self) -> None:
        experiment = self.selected_experiment
        if experiment is not None:
            self.set_opened(experiment, True)

    def action_close_group(self) -> None:
        """On a group row or on one of its jobs: close the group, the cursor on its row."""
        experiment = self.selected_experiment
        if experiment is None:
            row = self.rows_shown.get(self.selected_job_id or 0)
            experiment = row.job.experiment if row and row.job.experiment else None
        if experiment is not None:
            self.set_opened(experiment, False)
            self.move_cursor(row=self.get_row_index(group_key(experiment)), animate=False)

    def reveal(self, job_id: int) -> None:
        """Open the group a job belongs to, so that its row is on screen."""
        row = next((row for row in self.last_rows if row.job.id == job_id), None)
        if row is not None and row.job.experiment and row.job.experiment not in self.opened:
            self.set_opened(row.job.experiment, True)

    def set_opened(self, experiment: str, opened: bool) -> None:
        self.opened = self.opened | {experiment} if opened else self.opened - {experiment}
        self.show_rows(self.last_rows, self.last_filter)

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
            self.cells_shown = {key: self._cells(key, value) for key, value in self.values_shown.items()}
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
        return squeezed_widths({key: natural[key] for key in SQUEEZABLE}, room - numbers)

    def _fitted(self, cells: tuple) -> tuple:
        """cells with the squeezed name and env cut in their middle to their column's width."""
        return tuple(self._middle_cut(cell, self.squeezed.get(key)) if key in MIDDLE_CUT else cell
                     for (key, _), cell in zip(JOB_COLUMNS, cells))

    @staticmethod
    def _middle_cut(cell: Text | str, column_width: int | None) -> Text | str:
        if column_width is None or width(cell) <= column_width:
            return cell
        return cut(middle_cut(cell.plain if isinstance(cell, Text) else cell, column_width))

    def _rebuild(self, order: list[str] | None = None, selected: str | None = None) -> None:
        """The rows in order (default: as they are) under columns of the current widths (a DataTable cannot
        change a column's width in place); the cursor stays on the selected row."""
        if order is None:
            order, selected = [row.key.value for row in self.ordered_rows], self.selected_key
        self.clear(columns=True)
        self.ensure_columns()
        for key in order:
            fitted = self._fitted(self.cells_shown[key])
            self.add_row(*fitted, key=key)
            for (column, _), cell in zip(JOB_COLUMNS, fitted):
                self._widen_now(column, width(cell))
        if selected in order:
            self.move_cursor(row=order.index(selected), animate=False)
