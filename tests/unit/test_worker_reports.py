"""What the daemon takes from a worker's status.json besides its step, on a real store: claims, bounded."""
from __future__ import annotations

from pathlib import Path

from rlsup import client
from rlsup.daemon.worker_reports import WorkerReports
from rlsup.hardware import FakeHardware
from rlsup.jobs.record import EventKind
from rlsup.jobs.store import Store
from rlsup.run.status import WorkerStatus
from rlsup_testing import cartpole_job


def test_a_status_file_of_endless_notices_records_a_few_short_events(rlsup_home: Path, tmp_path: Path) -> None:
    """issue 49 (status files as claims): each new sentence in status.json's switched_off became an event, once
    per worker; a file anyone can write, of 16 MiB, rewritten four times a second, grew the store without end."""
    job = client.submit(cartpole_job(tmp_path), home=rlsup_home, start_daemon=False)
    with Store(rlsup_home) as store:
        reports = WorkerReports(store, FakeHardware())
        for round_number in range(3):
            sentences = tuple(f"round {round_number} feature {index} " + "x" * 5000 for index in range(1000))
            reports.record(job, 4321, WorkerStatus(pid=4321, notice="n" * 5000, switched_off=sentences))
        told = [event for event in store.events(job.id, 100_000)
                if event.kind in (EventKind.CHECKPOINT, EventKind.FEATURE_OFF)]
        # A handful of short sentences: a real worker tells at most three.
        assert 3 <= len(told) <= 10 and all(len(event.message) <= 1_000 for event in told), len(told)
        # A real worker's few sentences are each recorded once, whatever it repeats.
        reports.record(job, 99, WorkerStatus(pid=99, switched_off=("tensorboard is not installed",)))
        reports.record(job, 99, WorkerStatus(pid=99, switched_off=("tensorboard is not installed",)))
        assert [event.message for event in store.events(job.id, 100_000)].count("tensorboard is not installed") == 1
