"""Three real CUDA jobs packed onto one GPU by the memory their workers report through torch and NVML."""
from __future__ import annotations

from pathlib import Path

from cuda_testing import NEEDS_CUDA
from rlsup.jobs.state import ACTIVE, State
from rlsup.run.status import read_worker_status

pytestmark = NEEDS_CUDA


def cuda_job(harness, name: str, *, declared_gib: float) -> Path:
    """The suite's small CartPole DQN job on the GPU, long enough to stay running while the test looks."""
    path = harness.job_file(name, gpus=1, total_steps=10_000_000, checkpoint_every=0)
    text = path.read_text().replace('device = "auto"', 'device = "cuda"')
    path.write_text(text.replace("gpus = 1", f"gpus = 1\ngpu_memory_gb = {declared_gib}"))
    return path


def test_three_cuda_jobs_share_the_gpu_by_their_reported_memory(harness) -> None:
    harness.settings(cpu_jobs=1, jobs_per_gpu=4, gpu_memory_margin_gib=1.0)
    harness.start_daemon()
    first = harness.submit(cuda_job(harness, "first", declared_gib=0))
    # Never measured: it holds the GPU whole until its worker's first report.
    figure = harness.wait_for(lambda: harness.job(first.id).gpu_memory_bytes, timeout=120,
                              what="the first worker's GPU memory report")
    status = read_worker_status(Path(harness.job(first.id).run_dir))
    # torch's peak reserved always; NVML's count for the pid where the GPU's driver lists it (not in every
    # container): the figure placement goes by is the larger.
    assert status.gpu_memory.reserved_peak_bytes > 0, status.gpu_memory
    # The daemon keeps the largest figure reported, so it is at least the one in this status file.
    assert figure >= status.gpu_memory.figure, (figure, status.gpu_memory)
    others = [harness.submit(cuda_job(harness, name, declared_gib=1.0)) for name in ("second", "third")]
    for job in others:
        assert harness.wait_state(job.id, *ACTIVE, timeout=120).gpus == "0"
    for job in (first, *others):
        harness.wait_for(lambda: harness.job(job.id).gpu_memory_bytes, timeout=120, what=f"job {job.id}'s report")
        assert harness.job(job.id).state in ACTIVE
    code, out, _ = harness.cli("list")
    assert code == 0 and "gpu 0: 3 jobs, " in out, out
    for job in (first, *others):
        harness.cli("kill", str(job.id))
    for job in (first, *others):
        harness.wait_state(job.id, State.KILLED, timeout=60)
