"""MinAtar as fused games through JAX (jobs/minatar-vtrace-fused.toml shrunk): a trainer restored from a checkpoint
goes on bit for bit, and a machine without JAX, a device JAX does not have, and JAX running out of memory each
become one sentence."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from rlsup_testing import assert_one_line_error, path_hiding, run_rlsup

from rlsup import spec as specs

pytest.importorskip("gymnax")
JOB = Path(__file__).parents[2] / "jobs" / "minatar-vtrace-fused.toml"
STEPS = 16_000


def small_spec(total_steps: int = STEPS) -> specs.JobSpec:
    """The example's Breakout with 16 games a batch and a short budget."""
    spec = specs.load(JOB).replace("job", total_steps=total_steps).replace("vtrace", batch_size=16)
    spec = spec.replace("log", every_steps=800).replace("eval", every_steps=0)
    spec = spec.replace("checkpoint", every_steps=total_steps)
    return dataclasses.replace(spec, replay=(dataclasses.replace(spec.replay[0], capacity=16),))


def small_job(directory: Path) -> Path:
    path = directory / "breakout-fused.toml"
    path.write_text(small_spec().to_toml())
    return path


def test_a_fused_minatar_trainer_restored_from_a_checkpoint_goes_on_bit_for_bit(tmp_path: Path) -> None:
    """The one-process loop's whole state (the JAX games' key and state leaves among it), written as a real
    checkpoint and loaded into a trainer built afresh, trains on as the trainer that never stopped. In one
    process: tests/integration/test_fused_games.py pauses a fused run by SIGINT through `rlsup run` (a PyTorch
    game's); here each `rlsup run` would spend seconds importing and compiling JAX's game."""
    from rlsup.algos.fused_vtrace import FusedVtraceTrainer
    from rlsup.checkpoint.store import load_checkpoint, write_checkpoint

    spec, cpu = small_spec(), torch.device("cpu")
    straight = FusedVtraceTrainer(spec, cpu)
    for _ in range(30):
        straight.iterate()
    entry = write_checkpoint(tmp_path / "run", {"trainer": straight.state_dict()}, step=straight.step, episodes=0,
                             reason="pause", fingerprint=straight.fingerprint(), spec_sha256="-", metrics_bytes=0,
                             keep=1)
    resumed = FusedVtraceTrainer(spec, cpu)
    resumed.load_state_dict(load_checkpoint(entry.path)[1]["trainer"])
    for _ in range(30):
        straight_records, resumed_records = straight.iterate(), resumed.iterate()
        assert resumed_records == straight_records
    assert resumed.fingerprint() == straight.fingerprint() and resumed.step == straight.step == 60 * 16 * 5
    assert straight.episodes > 0  # episodes ended and the games reset on both sides


def test_the_loop_sees_minatar_as_gymnasiums_minatar_is_seen_and_its_checkpoint_plays_there(tmp_path: Path) -> None:
    """The networks take a fused game's images in the layout a gymnasium env's get (channels first, bool as 0 or
    255): the loop once fed MinAtar's 10x10x4 images as 10 channels of 10x4, which trained, yet left a network
    that enjoy, export and the reference game could not load. A fused run's policy plays the reference MinAtar."""
    from rlsup.algos.evaluate import play_episodes
    from rlsup.algos.fused_vtrace import FusedVtraceTrainer
    from rlsup.algos.impala import policy_from_checkpoint

    spec = small_spec()
    trainer = FusedVtraceTrainer(spec, torch.device("cpu"))
    trainer.iterate()
    assert trainer.observations.shape == (16, 4, 10, 10) and trainer.observations.dtype == torch.uint8
    assert set(trainer.observations.unique().tolist()) == {0, 255}
    policy = policy_from_checkpoint(spec, trainer.state_dict())
    reference = dataclasses.replace(spec.env, source="gymnasium")
    assert len(play_episodes(policy, reference, seed=1, episodes=2)) == 2


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
