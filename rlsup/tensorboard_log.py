"""A run's TensorBoard event files ([log] tensorboard), kept equal to metrics.jsonl across resumes."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Iterator

from rlsup import paths, runfiles

EVENT_FILES = "events.out.tfevents.*"
# TensorBoard shows a live run this much behind at most; the default of 120 s looks like a stalled run.
FLUSH_S = 10
# Events queued for the writer's thread before add_event waits: room for a rebuild to run ahead.
REBUILD_QUEUE = 1024
NOT_INSTALLED = ("[log] tensorboard = true but tensorboard is not installed: no TensorBoard files are written "
                 "(pip install tensorboard)")


def purge_all():
    """A SessionLog START at step 0: a reader drops every step it read before it (SummaryWriter's purge_step)."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    return Event(wall_time=time.time(), step=0, session_log=SessionLog(status=SessionLog.START))


class Unavailable(RuntimeError):
    """The tensorboard package is not installed."""


def scalars(record: dict) -> Iterator[tuple[str, float]]:
    """A metrics.jsonl record's numbers as TensorBoard tags: `train/loss`, `eval/mean` (kind/key)."""
    for key, value in record.items():
        if key in ("t", "step", "kind") or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            yield f"{record['kind']}/{key}", float(value)


class TensorBoardLog:
    """Event files in RUN/tensorboard/ that hold exactly what metrics.jsonl holds.

    Opening them rebuilds them from metrics.jsonl, which a resume has already cut back to its checkpoint:
    one fresh event file is written and the older ones removed, so a resume, a crash restart from an
    older checkpoint or a writer that died before it flushed never leaves a step twice or a gap. The
    fresh file starts with a SessionLog START at step 0: a TensorBoard that already read the older files
    drops what it had of them. A rebuild costs about 80 us a record (60,000 records of 3 numbers in 5 s on
    a 2-core x86-64, mostly tensorboard's pure-Python crc32c); torch's SummaryWriter, which wraps the same
    EventFileWriter with one event per number, took 15 s.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.writer = None

    def follow(self, record: dict, *, enabled: bool) -> None:
        """Add a record metrics.jsonl already holds; with [log] tensorboard turned off, close the files
        (turned on again, they are rebuilt: nothing written meanwhile is missing)."""
        if not enabled:
            self.close()
        elif self.writer is None:
            self.writer = self._rebuilt()  # the rebuild includes this record
        else:
            self._add(record)

    def _rebuilt(self):
        try:
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError:
            raise Unavailable(NOT_INSTALLED) from None
        directory = self.run_dir / paths.TENSORBOARD
        older = sorted(directory.glob(EVENT_FILES))
        self.writer = EventFileWriter(str(directory), max_queue_size=REBUILD_QUEUE, flush_secs=FLUSH_S)
        self.writer.add_event(purge_all())
        for record in runfiles.read_metrics(self.run_dir):
            self._add(record)
        self.writer.flush()
        for path in older:  # only once the fresh file holds everything: a crash here leaves both, not neither
            path.unlink(missing_ok=True)
        return self.writer

    def _add(self, record: dict) -> None:
        """One event per record, holding all its numbers (a tenth of the cost of one event per number)."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        values = [Summary.Value(tag=tag, simple_value=value) for tag, value in scalars(record)]
        if values:
            self.writer.add_event(Event(wall_time=record.get("t") or time.time(), step=record["step"],
                                        summary=Summary(value=values)))

    def close(self) -> None:
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()
