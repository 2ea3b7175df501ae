"""Reading and writing the small files of a run directory, shared by worker, daemon, CLI and TUI."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Iterator

from rlsup import atomic, own_files, paths, spec as specs


# ---------------------------------------------------------------------------------------------
# The kill marker (status.json: run/status.py, exit.json: run/exit.py)


def request_kill(run_dir: Path) -> None:
    """Mark the run so its worker's next stop signal aborts it without a checkpoint (run/signals.py)."""
    atomic.write_bytes(Path(run_dir) / paths.KILL_MARKER, b"")


# ---------------------------------------------------------------------------------------------
# metrics.jsonl


class MetricsWriter:
    """Appends metric records; each line is flushed so readers see whole lines only."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / paths.METRICS_FILE
        self.handle = own_files.append_binary(self.path)

    def write(self, record: dict) -> None:
        self.handle.write((json.dumps(record, separators=(",", ":")) + "\n").encode())

    def byte_length(self) -> int:
        return self.handle.tell()

    def sync(self) -> None:
        os.fsync(self.handle.fileno())

    def close(self) -> None:
        self.handle.close()


def check_own_files(run_dir: Path) -> None:
    """Refuse (NotOwnFile), before anything is built, a run whose files rlsup writes in place are links, FIFOs or
    hard links, or whose directories are links: a received run must not turn a resume into a write elsewhere."""
    run_dir = Path(run_dir)
    if os.path.lexists(run_dir / paths.METRICS_FILE):
        os.close(own_files.open_own(run_dir / paths.METRICS_FILE, os.O_WRONLY))
    for name in (paths.CHECKPOINTS, paths.TENSORBOARD, paths.SPEC_HISTORY, paths.INHERITED_CHECKPOINT):
        if (run_dir / name).is_symlink():
            raise own_files.refusal(run_dir / name, "is a symbolic link")
    for name in (paths.STATUS_FILE, paths.EXIT_FILE):  # replaced by a rename, which a directory refuses
        if (run_dir / name).is_dir() and not (run_dir / name).is_symlink():
            raise own_files.refusal(run_dir / name, "is a directory")


def discard_history(run_dir: Path) -> list[Path]:
    """Move checkpoints/ and metrics.jsonl aside (NAME.discarded-TIME), so the run can train again from
    step 0 with nothing of its past deleted; returns where they went."""
    run_dir = Path(run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    moved = []
    for name in (paths.CHECKPOINTS, paths.METRICS_FILE):
        source = run_dir / name
        if not os.path.lexists(source):
            continue
        stem, dot, suffix = name.partition(".")
        target = run_dir / f"{stem}.discarded-{stamp}{dot}{suffix}"
        os.rename(source, target)  # one rename: a crash leaves it either in place or aside, never half
        moved.append(target)
    if moved:
        atomic.fsync_directory(run_dir)
    return moved


def truncate_metrics(run_dir: Path, length: int) -> None:
    """Cut metrics.jsonl back to a checkpoint's recorded length, dropping a future that was thrown away."""
    path = Path(run_dir) / paths.METRICS_FILE
    try:
        descriptor = own_files.open_own(path, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        if os.fstat(descriptor).st_size > length:
            os.ftruncate(descriptor, length)
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


class MetricsReader:
    """Reads metrics.jsonl incrementally: each call returns only the whole lines added since the last."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / paths.METRICS_FILE
        self.offset = 0
        self.pending = b""
        self.restarted = False  # set when the file was cut back: the caller should drop what it holds

    def read_new(self) -> list[dict]:
        try:  # never a FIFO, which would block the TUI or the daemon for ever
            handle = os.fdopen(own_files.open_own(self.path, os.O_RDONLY), "rb")
        except OSError:
            return []
        with handle:
            size = os.fstat(handle.fileno()).st_size
            if size < self.offset:  # cut back on resume: the old tail is gone, start over
                self.offset, self.pending = 0, b""
                self.restarted = True
            handle.seek(self.offset)
            data = self.pending + handle.read(size - self.offset)
        self.offset = size
        complete, _, self.pending = data.rpartition(b"\n")
        return list(parse_lines(complete))


def parse_lines(data: bytes) -> Iterator[dict]:
    """The JSON objects of whole lines, skipping any line that is not one."""
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def read_metrics(run_dir: Path) -> list[dict]:
    """Every record of a run's metrics (tests and small tools; the TUI reads incrementally)."""
    return MetricsReader(run_dir).read_new()


# ---------------------------------------------------------------------------------------------
# Log tail


# What a log's tail reads at most, from the end: one read, linear and bounded whatever the file. A worker.log
# ending in one 24 MiB line (a `\r` progress bar) took `rlsup logs` 33 s when it was read block by block until
# enough newlines came, each block prepended to all the rest (issue 23).
TAIL_BYTES = 256 * 1024
# What the daemon quotes of worker.log in a failure's reason: it lives in the store and in every listing.
QUOTED_TAIL_BYTES = 16 * 1024
# Starts a line whose beginning lies before the bytes read.
CUT_MARK = "[line cut] "


def tail_lines(path: Path, count: int = 50, *, limit: int = TAIL_BYTES) -> list[str]:
    """read_tail's lines, and none of a file it refuses or cannot read: the TUI's pane, a failure's reason."""
    try:
        return read_tail(path, count, limit=limit)
    except OSError:
        return []


def read_tail(path: Path, count: int = 50, *, limit: int = TAIL_BYTES) -> list[str]:
    """The last count lines of a text file, from its last limit bytes; a line that begins before them is shown
    cut, after CUT_MARK. Only a regular file of the run is read: a link would show (and a failure's reason would
    store) a file outside it, a FIFO would block: raises NotOwnFile for those. A missing file has no lines."""
    try:
        descriptor = own_files.open_own(path, os.O_RDONLY)
    except FileNotFoundError:
        return []
    try:
        size = os.fstat(descriptor).st_size
        # One byte before the bytes shown: whether it ends a line says whether their first line is whole.
        start = max(0, size - limit - 1)
        data = os.pread(descriptor, size - start, start)
    finally:
        os.close(descriptor)
    cut = len(data) > limit and data[:1] not in (b"\n", b"\r")
    data = data[-limit:]
    lines = data.decode(errors="replace").splitlines()
    if cut and lines:
        lines[0] = CUT_MARK + lines[0]
    return lines[-count:]


def read_appended(path: Path, offset: int | None) -> tuple[bytes, int]:
    """What a log holds past offset (from its start when it was cut back below offset; nothing when offset is
    None, which starts at its end), and its size: `rlsup logs -f`. Opened as read_tail opens, FileNotFoundError too."""
    with os.fdopen(own_files.open_own(path, os.O_RDONLY), "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if offset is None or offset > size:  # at first, the end; cut back (truncated, replaced), its start
            offset = size if offset is None else 0
        handle.seek(offset)
        return handle.read(size - offset), size


# ---------------------------------------------------------------------------------------------
# The run's spec: job.toml plus every accepted version in spec-history/


class EditRefused(Exception):
    """An edited spec changes identity fields; the run keeps its old spec."""

    def __init__(self, changes: list[specs.Change]):
        self.changes = changes
        super().__init__(specs.refusal_message(changes))


def read_run_spec(run_dir: Path) -> specs.JobSpec:
    """The run's job.toml, its one reader (enjoy, export, fork, resume, the worker, the daemon): never through a link,
    never past a run's file limit."""
    return specs.load(Path(run_dir) / paths.JOB_FILE, read=own_files.read_small)


def write_run_spec(run_dir: Path, spec: specs.JobSpec) -> None:
    """Make spec the run's job.toml and keep a numbered copy in spec-history/."""
    run_dir = Path(run_dir)
    text = spec.to_toml()
    history = own_files.own_directory(run_dir / paths.SPEC_HISTORY)
    number = len(list(history.glob("*.toml"))) + 1
    atomic.write_text(history / f"{number:04d}.toml", text)
    atomic.write_text(run_dir / paths.JOB_FILE, text)


def accept_edit(run_dir: Path, edited: specs.JobSpec) -> list[specs.Change]:
    """Diff an edited spec against the run's; write it when no identity field changed.

    Returns the changes (empty when nothing differs); raises EditRefused otherwise.
    """
    judged = specs.judge(read_run_spec(run_dir), edited)
    if judged.refused:
        raise EditRefused(list(judged.changes))  # the whole edit: a foreground user edits the file and runs again
    if judged.changes:
        write_run_spec(run_dir, judged.spec)
    return list(judged.changes)
