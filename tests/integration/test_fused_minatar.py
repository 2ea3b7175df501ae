"""MinAtar as fused games through JAX (jobs/minatar-vtrace-fused.toml shrunk) as a user runs it: a SIGINT pause
resumes bit for bit, and a machine without JAX, a device JAX does not have, and JAX running out of memory each
become one sentence."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from rlsup_testing import assert_one_line_error, final_fingerprint, path_hiding, pause_then_resume, run_rlsup

from rlsup import spec as specs

pytest.importorskip("gymnax")
JOB = Path(__file__).parents[2] / "jobs" / "minatar-vtrace-fused.toml"
STEPS = 16_000


def small_job(directory: Path, *, total_steps: int = STEPS) -> Path:
    """The example's Breakout with 16 games a batch and a short budget, checkpointed at its end only."""
    spec = specs.load(JOB).replace("job", total_steps=total_steps).replace("vtrace", batch_size=16)
    spec = spec.replace("log", every_steps=800).replace("eval", every_steps=0)
    spec = spec.replace("checkpoint", every_steps=total_steps)
    spec = dataclasses.replace(spec, replay=(dataclasses.replace(spec.replay[0], capacity=16),))
    path = directory / "breakout-fused.toml"
    path.write_text(spec.to_toml())
    return path


def test_a_paused_fused_minatar_run_resumes_bit_for_bit(tmp_path: Path) -> None:
    job = small_job(tmp_path)
    straight, paused = tmp_path / "straight", tmp_path / "paused"
    trained = run_rlsup("run", job, "--run-dir", straight)
    assert trained.returncode == 0, trained.stderr
    pause_then_resume(job, paused, train_step=4_000, total_steps=STEPS)
    assert final_fingerprint(paused) == final_fingerprint(straight)


def test_without_jax_a_fused_minatar_job_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", path_hiding(tmp_path / "hidden", "jax"))
    job = small_job(tmp_path)
    assert_one_line_error(run_rlsup("validate", job), 2,
                          f"{job}:", "env.id: ", "run on JAX, which is not installed: pip install 'rlsup[jax]'")


def test_a_device_jax_does_not_have_is_one_sentence() -> None:
    from rlsup.algos.envs.jax_games import jax_device_of
    from rlsup.algos.envs.sources import EnvError

    with pytest.raises(EnvError, match=r"^JAX games run on a CPU or a CUDA GPU, and the job's device is mps$"):
        jax_device_of(torch.device("mps"))
    if not torch.cuda.is_available():  # this JAX is the CPU build the test extra installs
        with pytest.raises(EnvError, match=r"this JAX has no CUDA backend: install JAX's CUDA build"):
            jax_device_of(torch.device("cuda"))


def test_jax_running_out_of_memory_is_torchs_out_of_memory() -> None:
    """The worker holds a job whose GPU ran out of memory (worker/gpu_memory.py): JAX's RESOURCE_EXHAUSTED, here a
    real one from an allocation no machine has, becomes torch's OutOfMemoryError."""
    import jax
    import jax.numpy as jnp

    from rlsup.algos.envs.jax_games import run_on_device

    with pytest.raises(torch.cuda.OutOfMemoryError, match=r"^JAX: RESOURCE_EXHAUSTED: Out of memory"):
        run_on_device(lambda: jax.block_until_ready(jnp.zeros((2**46,), jnp.uint8)))
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"  # JAX leaves a GPU's memory to torch
