"""Placement by a real daemon: priority then submission order, CPU slots, fake GPUs without overlap."""
from __future__ import annotations

from rlsup.jobs.state import ACTIVE, State
from rlsup_testing import gpus_given


def visible_devices(harness, job_id: int) -> str:
    """CUDA_VISIBLE_DEVICES as the job's worker process has it, in its own words."""
    job = harness.job(job_id)
    harness.wait_for(lambda: gpus_given(job.run_dir, job.pid) is not None, timeout=60,
                     what=f"job {job_id}'s worker to start training", report=lambda: harness.report(job_id))
    return gpus_given(job.run_dir, job.pid)


def test_priority_slots_and_gpus(harness) -> None:
    harness.settings(cpu_jobs=1, jobs_per_gpu=1)
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "2"
    long = dict(total_steps=1_000_000, checkpoint_every=0)
    # Queued while no daemon runs, so the daemon sees them all at once.
    low = harness.submit(harness.job_file("low", **long))
    high = harness.submit(harness.job_file("high", **long), priority=5)
    gpu_jobs = [harness.submit(harness.job_file(f"gpu{index}", gpus=1, **long)) for index in range(3)]
    harness.start_daemon()

    harness.wait_state(high.id, *ACTIVE, timeout=30)
    first, second, third = gpu_jobs
    placed = [harness.wait_state(job.id, *ACTIVE, timeout=30) for job in (first, second)]
    assert sorted(job.gpus for job in placed) == ["0", "1"]
    for job in (*placed, high):
        # The state is recorded just before the spawn, the pid just after it.
        harness.wait_for(lambda: harness.job(job.id).pid, timeout=10, what="the worker's pid")
    for job in placed:
        assert visible_devices(harness, job.id) == job.gpus
    assert visible_devices(harness, high.id) == ""  # a CPU job sees no GPU at all
    # One CPU slot, two GPUs: the rest wait, and say why.
    assert harness.job(low.id).state is State.QUEUED and "CPU slot" in harness.job(low.id).reason
    assert harness.job(third.id).state is State.QUEUED and "GPU" in harness.job(third.id).reason

    # Ending the high-priority job frees its slot for the low one.
    assert harness.cli("kill", str(high.id))[0] == 0
    harness.wait_state(high.id, State.KILLED, timeout=30)
    harness.wait_state(low.id, *ACTIVE, timeout=30)

    # Ending a GPU job releases its GPU, which the waiting job gets: never two jobs on one GPU.
    freed = placed[0]
    assert harness.cli("kill", str(freed.id))[0] == 0
    assert harness.wait_state(freed.id, State.KILLED, timeout=30).gpus == ""
    moved = harness.wait_state(third.id, *ACTIVE, timeout=30)
    assert moved.gpus == freed.gpus
    active_gpus = [job.gpus for job in harness.store.jobs(ACTIVE) if job.gpus]
    assert sorted(active_gpus) == ["0", "1"]

    starts = [event.job_id for event in harness.store.events(None, 1000)
              if event.kind == "state" and event.to_state == "starting"]
    assert starts.index(high.id) < starts.index(low.id)
    assert starts.index(first.id) < starts.index(third.id) and starts.index(second.id) < starts.index(third.id)
    for job in (low, second, third):
        harness.cli("kill", str(job.id))
    for job in (low, second, third):
        harness.wait_state(job.id, State.KILLED, timeout=30)


def test_submit_warns_at_once_when_the_machine_lacks_the_gpus(harness, monkeypatch) -> None:
    monkeypatch.setenv("RLSUP_FAKE_GPUS", "0")
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "0"
    code, out, err = harness.cli("submit", harness.job_file("greedy", gpus=1))
    assert code == 0 and out.strip().isdigit()
    assert "warning" in err and ("needs 1 GPU; this machine has 0, so the daemon holds it until it finds GPUs: set "
                                 "[job] gpus = 0 to run it on the CPU") in err
    job = harness.job(int(out))
    assert harness.wait_state(job.id, State.QUEUED).state == State.QUEUED


def test_a_resumed_job_keeps_its_place_before_later_jobs(harness) -> None:
    """One CPU slot: pausing the first job starts the second; resuming the first takes its slot back."""
    harness.settings(cpu_jobs=1)
    long = dict(total_steps=1_000_000, checkpoint_every=0)
    first = harness.submit(harness.job_file("first", **long))
    second = harness.submit(harness.job_file("second", **long))
    harness.start_daemon()
    harness.wait_step(first.id, 1)
    assert harness.cli("pause", str(first.id))[0] == 0
    harness.wait_state(first.id, State.PAUSED, timeout=60)
    harness.wait_step(second.id, 1)

    assert harness.cli("resume", str(first.id))[0] == 0
    harness.wait_step(first.id, 1, timeout=60)
    later = harness.job(second.id)
    assert later.state is State.QUEUED and later.desired.value == "running", harness.report(second.id)
    assert harness.newest_checkpoint(later.run_dir).reason == "pause"  # it yielded with a checkpoint, lost nothing
    assert any(f"to job {first.id}" in event.message for event in harness.events(second.id, "state"))
    for job in (first, second):
        harness.cli("kill", str(job.id))
