"""What a live worker's status.json tells the daemon besides its step: notices for the events, its GPU memory."""
from __future__ import annotations

from rlsup.jobs.record import EventKind
from rlsup.jobs.store import Job, Store
from rlsup.run.status import WorkerStatus


class WorkerReports:
    """Records each notice once per worker as an event, and the job's GPU memory for placement."""

    def __init__(self, store: Store):
        self.store = store
        self.notices_seen: set[tuple[int, int, str]] = set()  # (job, worker pid, sentence) already recorded

    def record(self, job: Job, pid: int, status: WorkerStatus) -> None:
        self.record_notices(job.id, pid, status)
        self.record_gpu_memory(job, status)

    def record_notices(self, job_id: int, pid: int, status: WorkerStatus) -> None:
        """What a worker tells in status.json becomes an event, once per worker: what its start made of the
        checkpoints (newer ones skipped, and why), and each requested feature it switched off, when it did."""
        told = [(EventKind.CHECKPOINT, status.notice)] if status.notice else []
        told += [(EventKind.FEATURE_OFF, sentence) for sentence in status.switched_off]
        for kind, sentence in told:
            if (job_id, pid, sentence) not in self.notices_seen:
                self.notices_seen.add((job_id, pid, sentence))
                self.store.add_event(job_id, kind, sentence)

    def record_gpu_memory(self, job: Job, status: WorkerStatus) -> None:
        """Keep the largest GPU memory the job's workers reported: a resumed worker starts low and grows back
        to it, and packing a GPU by its early figure would leave the job short."""
        figure = status.gpu_memory.figure if status.gpu_memory else None
        if figure is not None and figure > (job.gpu_memory_bytes or 0):
            self.store.update(job.id, gpu_memory_bytes=figure)
