"""What a live worker's status.json tells the daemon besides its step: notices for the events, its GPU memory."""
from __future__ import annotations

import dataclasses

from rlsup.hardware import Machine
from rlsup.jobs.record import EventKind
from rlsup.jobs.store import Job, Store
from rlsup.run.status import WorkerStatus

# A real worker tells at most three notices (a resume's skipped checkpoints, a GPU it lacks, TensorBoard missing),
# each a sentence; status.json, which anyone who can write the run can write, could tell millions of any length.
MAX_NOTICES = 8       # events recorded per worker
NOTICE_CHARS = 1_000  # of each one


class WorkerReports:
    """Records each notice once per worker as an event, and the job's GPU memory for placement."""

    def __init__(self, store: Store, machine: Machine):
        self.store, self.machine = store, machine
        self.notices_seen: dict[tuple[int, int], set[str]] = {}  # (job, worker pid): the sentences recorded

    def record(self, job: Job, pid: int, status: WorkerStatus) -> None:
        self.record_notices(job.id, pid, status)
        self.record_gpu_memory(job, status)

    def record_notices(self, job_id: int, pid: int, status: WorkerStatus) -> None:
        """What a worker tells in status.json becomes an event, once per worker: what its start made of the
        checkpoints (newer ones skipped, and why), and each requested feature it switched off, when it did."""
        told = [(EventKind.CHECKPOINT, status.notice)] if status.notice else []
        told += [(EventKind.FEATURE_OFF, sentence) for sentence in status.switched_off]
        seen = self.notices_seen.setdefault((job_id, pid), set())
        for kind, sentence in told:
            sentence = sentence[:NOTICE_CHARS]
            if sentence not in seen and len(seen) < MAX_NOTICES:
                seen.add(sentence)
                self.store.add_event(job_id, kind, sentence)

    def record_gpu_memory(self, job: Job, status: WorkerStatus) -> None:
        """Keep the largest GPU memory the job's workers reported: a resumed worker starts low and grows back
        to it, and packing a GPU by its early figure would leave the job short.

        The figure is a claim: whoever can write the run can write status.json in the worker's name. One larger
        than the job's own GPU is not kept, and a kept one that no GPU of the machine holds (a forgery kept
        before this check) gives way to the next report, or the job would never be placed again."""
        figure = status.gpu_memory.figure if status.gpu_memory else None
        if figure is None:  # a CPU job, or none reported yet: no GPU to ask (this runs every status poll)
            return
        totals = self.machine.gpu_memory_totals()
        if not holds(figure, {index: totals.get(index) for index in job.gpu_indices}):
            return
        kept = job.gpu_memory_bytes
        if kept is None or figure > kept or not holds(kept, totals):
            self.store.update(job.id, gpu_memory_bytes=figure)


def holds(figure: int, totals: dict[int, int | None]) -> bool:
    """Whether some GPU of these holds figure bytes; True where no total is known, as nothing can be judged."""
    known = [total for total in totals.values() if total is not None]
    return not known or figure <= max(known)


def memory_need(job: Job, totals: dict[int, int | None]) -> int | None:
    """job.gpu_memory_need, with a measured figure that no GPU of the machine holds counted as not measured:
    the job then takes a whole GPU, and its worker's first report replaces the figure (record_gpu_memory)."""
    if job.gpu_memory_bytes is not None and not holds(job.gpu_memory_bytes, totals):
        job = dataclasses.replace(job, gpu_memory_bytes=None)
    return job.gpu_memory_need
