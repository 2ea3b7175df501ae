"""Training on a real GPU: the daemon hands it out, and a paused-then-resumed run ends where a straight one does."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cuda_testing import NEEDS_CUDA, weight_difference
from rlsup.jobs.state import State
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup.run import files as runfiles
from rlsup_testing import (SMALL_BREAKOUT, final_fingerprint, gpus_given, pause_when, rlsup_command, run_rlsup,
                           start_rlsup, vtrace_text)

pytestmark = NEEDS_CUDA

PONG_STEPS = 3_000
VTRACE_STEPS = 200 * 10 * 8  # 200 updates of unroll 10 x batch 8


def pong_job(directory: Path) -> Path:
    """The suite's small Atari DQN job, on Pong and the GPU."""
    text = SMALL_BREAKOUT.format(total_steps=PONG_STEPS).replace('id = "ALE/Breakout-v5"', 'id = "ALE/Pong-v5"')
    path = directory / "pong.toml"
    path.write_text(text.replace("threads = 1", 'threads = 1\ndevice = "cuda"'))
    return path


def vtrace_job(directory: Path) -> Path:
    """A CartPole V-trace job, serial (the actor steps in the learner's process: bit-exact on the CPU), on the GPU."""
    text = vtrace_text(total_steps=VTRACE_STEPS, serial=True, actors=2, envs_per_actor=2, unroll_length=10,
                       batch_size=8, lr=2e-3, hidden_sizes=[32, 32], feature_size=16,
                       replays=({"kind": "queue", "capacity": 8},))
    path = directory / "vtrace.toml"
    path.write_text(text.replace('device = "cpu"', 'device = "cuda"'))
    return path


def test_the_daemon_gives_a_gpu_job_the_gpu_and_a_cpu_job_none(harness) -> None:
    harness.settings(cpu_jobs=2, jobs_per_gpu=1)
    harness.start_daemon()
    gpu_job = harness.submit(harness.job_file("gpu", gpus=1, total_steps=3_000))
    cpu_job = harness.submit(harness.job_file("cpu", total_steps=3_000))
    for job in (gpu_job, cpu_job):
        harness.wait_for(lambda: harness.job(job.id).pid, timeout=60, what="the worker's pid")
    assert harness.job(gpu_job.id).gpus == "0"
    # Forked by the daemon's fork server, which imported torch without touching CUDA: the worker sees the GPU
    # it was given (in its own environment: a fork's /proc/PID/environ is its server's) and trains on it.
    pids = {job.id: harness.job(job.id).pid for job in (gpu_job, cpu_job)}
    for job, device, given in ((gpu_job, "cuda:0", "0"), (cpu_job, "cpu", "")):
        harness.wait_state(job.id, State.DONE, timeout=180)
        assert gpus_given(harness.job(job.id).run_dir, pids[job.id]) == given
        log = (Path(harness.job(job.id).run_dir) / "worker.log").read_text()
        assert f" on {device} from step 0" in log, log[-2000:]


@pytest.mark.parametrize("make_job, pause_at", [(pong_job, 1_500), (vtrace_job, VTRACE_STEPS // 4)],
                         ids=["pong-dqn", "cartpole-vtrace"])
def test_pause_by_sigint_then_resume_on_cuda_ends_as_the_straight_run(tmp_path: Path, make_job, pause_at) -> None:
    job = make_job(tmp_path)
    straight = tmp_path / "straight"
    result = run_rlsup("run", job, "--run-dir", straight, timeout=280)
    assert result.returncode == 0, result.stderr

    paused = tmp_path / "paused"
    process = start_rlsup("run", job, "--run-dir", paused)
    pause_when(process, paused, train_step=pause_at)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    assert pause_at <= read_exit(paused).step < runfiles.read_run_spec(paused).job.total_steps

    result = run_rlsup("run", "--resume", paused, timeout=280)
    assert result.returncode == 0, result.stderr
    # Deterministic kernels are asked for (torch.use_deterministic_algorithms, warn_only): where a kernel has
    # none, the runs part ways, and the message gives the measured size of the difference.
    assert final_fingerprint(paused) == final_fingerprint(straight), weight_difference(paused, straight)


def test_a_cuda_job_with_the_gpu_hidden_stops_with_one_sentence(tmp_path: Path) -> None:
    """CUDA_VISIBLE_DEVICES="" hides the GPU: device = "cuda" is then a usage error (exit 2), never a traceback."""
    result = subprocess.run(rlsup_command("run", pong_job(tmp_path), "--run-dir", tmp_path / "hidden"),
                            capture_output=True, text=True, timeout=240,
                            env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result.stderr
    assert "no GPU is visible (CUDA_VISIBLE_DEVICES='')" in result.stderr and "Traceback" not in result.stderr
