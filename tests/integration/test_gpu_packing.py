"""Jobs packed onto fake GPUs by the memory their workers report or declare, and a CUDA out-of-memory held paused.

The workers run on the CPU under RLSUP_FAKE_GPUS; a test plugin (tests/plugins/gpu_memory_algorithm) reports the
figure each job's seed chooses, in tenths of a GiB, as a CUDA learner reports torch's peak reserved memory."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Iterator

import pytest
from rlsup_testing import forge_status, install_plugin, run_rlsup

from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.checkpoint.trajectory import Trajectory
from rlsup.formatting import GIB
from rlsup.hardware import GpuMemory
from rlsup.jobs.state import ACTIVE, State
from rlsup.jobs.store import Job
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup.run.status import read_worker_status

GPU_JOB = """
[job]
name = "{name}"
algo = "gpumem"
seed = {seed}
total_steps = {total_steps}
device = "auto"
gpus = 1
gpu_memory_gb = {declared}
threads = 1

[env]
id = "CartPole-v1"

[checkpoint]
every_steps = 200
keep = 3

[log]
every_steps = 100
"""


@pytest.fixture(autouse=True)
def installed_plugins(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Iterator[Path]:
    """The plugins on the PYTHONPATH of the daemon and its workers."""
    site = tmp_path_factory.mktemp("site-packages")
    install_plugin(site, "tiny_algorithm")
    install_plugin(site, "gpu_memory_algorithm", "gpumem = gpu_memory_algorithm:ALGORITHM")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    yield site


def submit(harness, name: str, *, gib: float, declared: float = 0) -> Job:
    """`rlsup submit` of a plugin job reporting gib, to the running daemon (this process has no plugin)."""
    path = harness.jobs_directory / f"{name}.toml"
    path.write_text(GPU_JOB.format(name=name, seed=round(gib * 10), total_steps=10_000_000, declared=declared))
    result = run_rlsup("submit", path)
    assert result.returncode == 0, result.stderr
    return harness.store.jobs()[-1]


def test_jobs_pack_by_memory_within_the_cap_and_an_unmeasured_one_waits_for_a_whole_gpu(harness) -> None:
    # One fake GPU of 8 GiB and a 1 GiB margin: 3 + 3 GiB fit, a third 3 GiB job does not.
    harness.settings(jobs_per_gpu=2, gpu_memory_margin_gib=1.0)
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1x8GiB"
    harness.start_daemon()
    first = submit(harness, "first", gib=3.0)
    second = submit(harness, "second", gib=3.0, declared=2.5)
    third = submit(harness, "third", gib=0.5, declared=0.5)

    harness.wait_state(first.id, State.RUNNING, timeout=60)
    # Until its worker reports, the first job holds the whole GPU.
    measured = harness.wait_for(lambda: harness.job(first.id).gpu_memory_bytes, timeout=60,
                                what="the first job's GPU memory report")
    assert measured == 3 * GIB
    # The worker's own record of it: status.json, and each checkpoint's manifest from then on.
    run_dir = Path(harness.job(first.id).run_dir)
    assert read_worker_status(run_dir).gpu_memory == GpuMemory(reserved_peak_bytes=3 * GIB, process_bytes=None)
    harness.wait_for(lambda: list_checkpoints(run_dir), timeout=60, what="a checkpoint")
    assert Trajectory.of_manifest(list_checkpoints(run_dir)[-1].manifest).gpu_memory.figure == 3 * GIB
    # Then the second goes beside it: declared 2.5 GiB, reporting 3 GiB, placed by the larger once known.
    assert harness.wait_state(second.id, *ACTIVE, timeout=60).gpus == "0"
    harness.wait_for(lambda: harness.job(second.id).gpu_memory_bytes, timeout=60, what="the second job's report")
    # The third would fit by memory (3 + 3 + 0.5 + 1 <= 8) but jobs_per_gpu = 2 caps the GPU.
    waiting = harness.wait_for(lambda: (job := harness.job(third.id)).reason and job, timeout=30,
                               what="the third job's waiting reason")
    assert waiting.state is State.QUEUED and "jobs_per_gpu" in waiting.reason, waiting.reason

    code, out, _ = harness.cli("list")
    assert code == 0
    lines = {line.split()[1]: line for line in out.splitlines()[1:]}
    assert "gpu 0 (3/8 GiB)" in lines["first"] and "gpu 0 (3/8 GiB)" in lines["second"], out
    assert "gpu 0: 2 jobs, 6/8 GiB" in out, out

    # Killing one frees room under the cap: the third goes on.
    assert harness.cli("kill", str(first.id))[0] == 0
    assert harness.wait_state(third.id, *ACTIVE, timeout=60).gpus == "0"
    for job in (second, third):
        harness.cli("kill", str(job.id))
        harness.wait_state(job.id, State.KILLED, timeout=60)


def test_a_cuda_out_of_memory_pauses_held_and_the_job_then_runs_alone(harness) -> None:
    harness.settings(jobs_per_gpu=4, gpu_memory_margin_gib=1.0)
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1x8GiB"
    harness.start_daemon()
    crowded = submit(harness, "oom-at-500", gib=2.0)
    harness.wait_for(lambda: harness.job(crowded.id).gpu_memory_bytes, timeout=60, what="its report")
    beside = submit(harness, "beside", gib=4.0, declared=4.0)
    harness.wait_state(beside.id, *ACTIVE, timeout=60)

    paused = harness.wait_state(crowded.id, State.PAUSED, timeout=120)
    assert paused.reason.startswith("CUDA out of memory at 2 GiB on GPU 0; it resumes from its checkpoint at "
                                    "step 400"), paused.reason
    record = read_exit(paused.run_dir)
    assert record.code == EXIT_PAUSED and record.held and record.step == 500
    assert "Traceback" not in paused.reason
    # Held: no restart follows, however long the daemon looks at it.
    time.sleep(2.0)
    assert harness.job(crowded.id).state is State.PAUSED
    assert [to for _, to in harness.transitions(crowded.id)].count("starting") == 1
    # It ran out beside another job, so from now on it needs a whole GPU: resumed, it waits for one.
    assert harness.job(crowded.id).gpu_memory_bytes == 8 * GIB
    assert harness.cli("resume", str(crowded.id))[0] == 0
    # Not the resume's own "running requested", which a CI run caught before the daemon had judged the room.
    waiting = harness.wait_for(lambda: (job := harness.job(crowded.id)).state is State.QUEUED
                               and job.reason.startswith("waiting for") and job,
                               timeout=30, what="the resumed job's waiting reason")
    assert "waiting for 1 GPU with 9 GiB free (most free: 4 of 8 GiB on GPU 0)" in waiting.reason, waiting.reason
    assert harness.cli("kill", str(beside.id))[0] == 0
    assert harness.wait_state(crowded.id, *ACTIVE, timeout=60).gpus == "0"
    harness.cli("kill", str(crowded.id))
    harness.wait_state(crowded.id, State.KILLED, timeout=60)


def test_a_forged_gpu_memory_figure_is_not_kept_and_a_real_report_replaces_one(harness) -> None:
    """issue 49 item 8: a status.json with the worker's pid and reserved_peak_bytes = 2**59 became the kept figure
    (the largest ever), and the paused job "needs 1 GPU with 536870912 GiB" for good. A figure larger than its GPU
    is not kept, and one no GPU of the machine holds (kept before) is replaced by the resumed worker's report."""
    harness.settings(jobs_per_gpu=2)
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1x8GiB"
    harness.start_daemon()
    job = submit(harness, "forged", gib=3.0)
    harness.wait_for(lambda: harness.job(job.id).gpu_memory_bytes, timeout=60, what="its report")
    forge_status(Path(job.run_dir), harness.job(job.id).pid, 2.0, step=1,
                 gpu_memory=GpuMemory(reserved_peak_bytes=2 ** 59, process_bytes=9 * GIB))
    assert harness.job(job.id).gpu_memory_bytes == 3 * GIB

    assert harness.cli("pause", str(job.id))[0] == 0
    harness.wait_state(job.id, State.PAUSED, timeout=60)
    harness.store.update(job.id, gpu_memory_bytes=2 ** 59)  # as a daemon before this fix kept it
    assert harness.cli("resume", str(job.id))[0] == 0
    assert harness.wait_state(job.id, *ACTIVE, timeout=60).gpus == "0", harness.report(job.id)
    harness.wait_for(lambda: harness.job(job.id).gpu_memory_bytes == 3 * GIB, timeout=60,
                     what="the resumed worker's report to replace the figure", report=lambda: harness.report(job.id))
    harness.cli("kill", str(job.id))
    harness.wait_state(job.id, State.KILLED, timeout=60)


def test_a_foreground_run_out_of_cuda_memory_says_so_in_one_sentence(tmp_path) -> None:
    job = tmp_path / "oom.toml"
    job.write_text(GPU_JOB.format(name="oom-at-300", seed=25, total_steps=1_000, declared=0).replace(
        'device = "auto"\ngpus = 1', 'device = "cpu"\ngpus = 0'))
    result = run_rlsup("run", job, "--run-dir", tmp_path / "run")
    assert result.returncode == EXIT_PAUSED and "Traceback" not in result.stderr, result.stderr
    # As any pause of a foreground run: why, then how to go on.
    why, then = result.stderr.strip().splitlines()[-2:]
    assert why == "CUDA out of memory at 2.5 GiB on GPU 0; it resumes from its checkpoint at step 200", result.stderr
    assert then == f"continue with: rlsup run --resume {tmp_path / 'run'}"
    assert read_exit(tmp_path / "run").held
    assert "OutOfMemoryError" in (tmp_path / "run" / "worker.log").read_text()  # its traceback, for whoever looks


def waiting_or_placed(harness, job_id: int) -> Job:
    """The job once the daemon has either started it or said why it waits."""
    def told() -> Job | None:
        job = harness.job(job_id)
        return job if job.reason or job.state in ACTIVE else None
    return harness.wait_for(told, timeout=60, what=f"job {job_id} to start or say why it waits",
                            report=lambda: harness.report(job_id))


def test_a_job_that_fits_now_starts_before_a_larger_one_that_must_wait(harness) -> None:
    """issue 50 item 6: a 4 GiB job that fitted waited behind a 10 GiB one that did not. Two fake 16 GiB GPUs hold
    8 GiB each: the 10 GiB job keeps GPU 0 (equal load, lower index), the 4 GiB one starts beside the job on GPU 1,
    and the large one starts on GPU 0 once that GPU's job ends."""
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "2"
    harness.start_daemon()
    first = submit(harness, "first", gib=8.0, declared=8)
    assert harness.wait_state(first.id, *ACTIVE, timeout=60).gpus == "0"
    second = submit(harness, "second", gib=8.0, declared=8)
    assert harness.wait_state(second.id, *ACTIVE, timeout=60).gpus == "1"
    large = submit(harness, "large", gib=10.0, declared=10)
    assert "waiting for 1 GPU with 11 GiB free" in waiting_or_placed(harness, large.id).reason
    small = submit(harness, "small", gib=4.0, declared=4)
    placed = waiting_or_placed(harness, small.id)
    assert placed.state in ACTIVE and placed.gpus == "1", harness.report(small.id)
    assert harness.job(large.id).state is State.QUEUED

    assert harness.cli("kill", str(first.id))[0] == 0
    assert harness.wait_state(large.id, *ACTIVE, timeout=60).gpus == "0"
    for job in (second, large, small):
        harness.cli("kill", str(job.id))
        harness.wait_state(job.id, State.KILLED, timeout=60)


def test_a_job_raised_past_every_gpu_is_held_with_its_reason(harness) -> None:
    """issue 50 item 6: a job that gets past submit's check (here an edit raising gpu_memory_gb while it waits)
    waited for ever in silence. The daemon holds it queued, saying why in `rlsup list`, and it starts by itself
    once an edit lowers the figure again."""
    harness.settings(gpu_memory_margin_gib=1.0)
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1x8GiB"
    harness.start_daemon()
    busy = submit(harness, "busy", gib=6.0, declared=6)
    harness.wait_state(busy.id, *ACTIVE, timeout=60)
    raised = submit(harness, "raised", gib=1.0, declared=2)  # 6 + 2 + 1 > 8: it waits for memory
    assert "waiting for 1 GPU with 3 GiB free" in waiting_or_placed(harness, raised.id).reason
    path = Path(raised.spec_path)
    path.write_text(path.read_text().replace("gpu_memory_gb = 2\n", "gpu_memory_gb = 40\n"))

    held = harness.wait_for(lambda: (job := harness.job(raised.id)).reason.startswith("held:") and job, timeout=30,
                            what="the job to be held", report=lambda: harness.report(raised.id))
    assert held.state is State.QUEUED and held.reason == (
        "held: needs 1 GPU with 40 GiB; this machine has none that large (1 GPU, the largest of 8 GiB): set [job] "
        "gpu_memory_gb = 8 or less to run it"), held.reason
    code, out, _ = harness.cli("list")
    lines = {line.split()[1]: line for line in out.splitlines()[1:] if len(line.split()) > 1}
    assert code == 0 and "queued: held: needs 1 GPU with 40 GiB" in lines["raised"], out

    path.write_text(path.read_text().replace("gpu_memory_gb = 40\n", "gpu_memory_gb = 1\n"))
    assert harness.wait_state(raised.id, *ACTIVE, timeout=60).gpus == "0"
    for job in (busy, raised):
        harness.cli("kill", str(job.id))
        harness.wait_state(job.id, State.KILLED, timeout=60)
