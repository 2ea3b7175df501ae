"""A run's TensorBoard event files ([log] tensorboard), kept equal to metrics.jsonl across resumes."""
from __future__ import annotations

import importlib
import itertools
import math
import os
import socket
import time
from pathlib import Path
from typing import BinaryIO, Iterator

from rlsup import own_files, paths
from rlsup.run import files as runfiles
from rlsup.run import metrics

EVENT_FILES = "events.out.tfevents.*"
# A checkpoint's Trajectory.tensorboard_events (checkpoint/trajectory.py) holds {"file": name, "bytes": length}:
# where the event file stood at it.
NOT_INSTALLED = ("[log] tensorboard = true but tensorboard is not installed: no TensorBoard files are written "
                 "(pip install tensorboard)")
_file_numbers = itertools.count()  # two files made within a second by one process get two names


class Unavailable(RuntimeError):
    """The tensorboard package is not installed."""


def scalars(record: dict) -> Iterator[tuple[str, float]]:
    """A metrics.jsonl record's numbers as TensorBoard tags: `train/loss`, `eval/mean` (kind/key)."""
    for key, value in record.items():
        if key in metrics.COMMON_KEYS or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            yield f"{record[metrics.KIND]}/{key}", float(value)


class EventFile:
    """One event file written a record at a time in tensorboard's TFRecord framing (length, crc, data, crc).

    Written in the worker's thread rather than by EventFileWriter's: a checkpoint must know the byte length
    that holds every record up to it, and a resume must be able to append to an existing file.
    """

    def __init__(self, path: Path, file: BinaryIO):
        from tensorboard.summary.writer.record_writer import RecordWriter

        self.path, self.file = path, file
        self.records = RecordWriter(file)

    @classmethod
    def create(cls, directory: Path) -> "EventFile":
        """A fresh file that opens with a purge of every step a reader read before it."""
        from tensorboard.compat.proto.event_pb2 import Event, SessionLog, SourceMetadata

        path = fresh_path(directory)
        events = cls(path, _own(path, CREATE, "wb"))
        events.add(Event(wall_time=time.time(), file_version="brain.Event:2",
                         source_metadata=SourceMetadata(writer="rlsup")))
        # A SessionLog START at step 0: a reader drops every step it read before it (SummaryWriter's purge_step).
        events.add(Event(wall_time=time.time(), step=0, session_log=SessionLog(status=SessionLog.START)))
        return events

    @classmethod
    def appending(cls, path: Path, length: int) -> "EventFile":
        file = _own(path, os.O_RDWR, "r+b")
        file.seek(length)
        return cls(path, file)

    @classmethod
    def copied(cls, source: Path, length: int) -> "EventFile":
        """A fresh file holding source's first length bytes, its own purge at step 0 among them."""
        path = fresh_path(source.parent)
        with _own(source, os.O_RDONLY, "rb") as reader, _own(path, CREATE, "wb") as writer:
            while writer.tell() < length and (chunk := reader.read(min(length - writer.tell(), 1 << 20))):
                writer.write(chunk)
        return cls.appending(path, length)

    def add(self, event) -> None:
        self.records.write(event.SerializeToString())

    def flush(self) -> None:
        """Hand what was added to the OS, where a live TensorBoard reads it."""
        self.file.flush()

    def sync(self) -> dict:
        """Flush to disk; where the file stands now, as a checkpoint records it (Trajectory.tensorboard_events)."""
        self.file.flush()
        os.fsync(self.file.fileno())
        return {"file": self.path.name, "bytes": self.file.tell()}

    def close(self) -> None:
        self.file.close()


CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL  # a fresh event file: fresh_path checked that none is there


def _own(path: Path, flags: int, mode: str) -> BinaryIO:
    """An event file opened as own_files opens a run's files: 0600, never through a link."""
    return os.fdopen(own_files.open_own(path, flags), mode)


def fresh_path(directory: Path) -> Path:
    """A new event file's path, named as EventFileWriter names them."""
    own_files.own_directory(directory)
    while True:
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}"
        path = directory / f"{name}.{next(_file_numbers)}"
        if not path.exists():
            return path


class TensorBoardLog:
    """Event files in RUN/tensorboard/ that hold exactly what metrics.jsonl holds.

    Every checkpoint records the event file's name and length beside metrics.jsonl's (resume_at hands them
    back), so a resume continues the file from where its checkpoint left it. After a pause the file ends
    there: the resume appends in place, and a TensorBoard watching it reads on. After a crash the file may
    hold records past the checkpoint: its first bytes, up to the checkpoint (a record boundary, so the
    TFRecord framing stays whole), are copied into a fresh file and the old one removed. Cutting the file
    in place would be cheaper, but a TensorBoard that had read past the cut would go on at its old offset,
    where records of the same size as the discarded ones would be taken for them unseen; a fresh file
    opens with a SessionLog START at step 0, so a reader that moves on to it drops what it had.

    Without a usable record (a checkpoint from before it, a fork, files not as it says, or [log] tensorboard
    switched on mid-run) the files are rebuilt from metrics.jsonl, which the resume has already cut back to
    its checkpoint: about 80 us a record (60,000 records of 3 numbers in 5 s on a 2-core x86-64, mostly
    tensorboard's pure-Python crc32c). Either way no step is there twice or missing.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.events: EventFile | None = None
        self.resume_point: dict | None = None  # the checkpoint's tensorboard_events, until first opened

    def resume_at(self, point: dict | None) -> None:
        self.resume_point = point

    def follow(self, record: dict, *, enabled: bool) -> None:
        """Add a record metrics.jsonl already holds; with [log] tensorboard turned off, close the files
        (turned on again, they are rebuilt: nothing written meanwhile is missing)."""
        if not enabled:
            self.close()
            self.resume_point = None
        elif self.events is None:
            self.events = self._opened(record)
        else:
            self._add(record)
            self.events.flush()

    def sync(self) -> dict | None:
        """For a checkpoint: the event file on disk up to every record added, and where it stands (None: no file)."""
        return self.events.sync() if self.events is not None else None

    def _opened(self, record: dict) -> EventFile:
        """The resumed checkpoint's event file, continued with record; else one rebuilt from metrics.jsonl,
        which holds record already."""
        self._require_tensorboard()
        point, self.resume_point = self.resume_point or {}, None
        self.events = self._continued(point.get("file"), point.get("bytes"))
        if self.events is None:
            return self._rebuilt()
        self._add(record)
        self.events.flush()
        return self.events

    def _continued(self, name: object, length: object) -> EventFile | None:
        """The checkpoint's event file at its length, when it is there whole and alone; else None."""
        directory = own_files.own_directory(self.run_dir / paths.TENSORBOARD)  # nothing through a link out
        if not isinstance(name, str) or not isinstance(length, int):
            return None
        path = directory / name
        if sorted(directory.glob(EVENT_FILES)) != [path] or path.stat().st_size < length:
            return None
        if path.stat().st_size == length:
            return EventFile.appending(path, length)
        fresh = EventFile.copied(path, length)
        fresh.sync()
        path.unlink()  # only once the copy is on disk: a crash here leaves two files, which the next start rebuilds
        return fresh

    def _rebuilt(self) -> EventFile:
        directory = self.run_dir / paths.TENSORBOARD
        older = sorted(directory.glob(EVENT_FILES))
        self.events = EventFile.create(directory)
        for record in runfiles.read_metrics(self.run_dir):
            self._add(record)
        self.events.sync()
        for path in older:  # only once the fresh file holds everything: a crash here leaves both, not neither
            path.unlink(missing_ok=True)
        return self.events

    def _add(self, record: dict) -> None:
        """One event per record, holding all its numbers (a tenth of the cost of one event per number)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars(record)]
        if values:
            self.events.add(Event(wall_time=record.get("t") or time.time(), step=record["step"],
                                  summary=Summary(value=values)))

    @staticmethod
    def _require_tensorboard() -> None:
        try:
            importlib.import_module("tensorboard.summary.writer.record_writer")
        except ImportError:
            raise Unavailable(NOT_INSTALLED) from None

    def close(self) -> None:
        if self.events is not None:
            events, self.events = self.events, None
            events.close()
