"""rlsup export: the exported model's actions equal `rlsup enjoy`'s, observation by observation, in TorchScript
and in ONNX (through onnxruntime), for DQN and V-trace on CartPole and DQN on MinAtar Breakout's images."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from rlsup_testing import assert_one_line_error, cartpole_text, recorded_play, run_rlsup, trained_to_budget

from rlsup.run import files as runfiles
from rlsup.algos.envs.training import probe_env

VTRACE = """
[job]
algo = "vtrace"
seed = 5
total_steps = 4_000
threads = 1

[env]
id = "CartPole-v1"

[vtrace]
envs_per_actor = 2
unroll_length = 10
batch_size = 8
lr = 2e-3
hidden_sizes = [32, 32]
feature_size = 16
serial = true

[[replay]]
kind = "queue"
capacity = 8
"""

MINATAR = """
[job]
seed = 2
total_steps = 800
threads = 1

[env]
id = "MinAtar/Breakout-v1"

[dqn]
batch_size = 16
learning_starts = 100
train_every = 4
target_update_every = 100
epsilon_end_step = 500

[[replay]]
capacity = 1_000
"""

JOBS = {"dqn-cartpole": cartpole_text(total_steps=1_500, lr="3e-3"), "vtrace-cartpole": VTRACE, "dqn-minatar": MINATAR}


def trained(directory: Path, text: str) -> Path:
    """A run of the job text trained in the foreground to its budget, in directory/run; its final checkpoint is
    `latest`."""
    job = directory / "job.toml"
    job.write_text(text)
    return trained_to_budget(job, directory / "run")


def export(run_dir: Path, format: str, out: Path) -> dict:
    result = run_rlsup("export", run_dir, "--format", format, "--out", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out)
    return json.loads(out.with_name(out.name + ".json").read_text())


def torchscript_actions(path: Path, observations: np.ndarray) -> np.ndarray:
    model = torch.jit.load(str(path))
    return model(torch.as_tensor(observations)).numpy()


def onnx_actions(path: Path, observations: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["actions"], {"observations": observations})[0]


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")
@pytest.mark.parametrize("job", sorted(JOBS))
def test_exported_policies_play_enjoys_actions(tmp_path: Path, job: str) -> None:
    run_dir = trained(tmp_path, JOBS[job])
    spec = runfiles.read_run_spec(run_dir)
    observations, actions = recorded_play(run_dir)
    assert len(set(actions.tolist())) > 1, "a policy playing one action only would make the comparison weak"
    for format, play in (("torchscript", torchscript_actions), ("onnx", onnx_actions)):
        out = tmp_path / f"policy.{format}"
        described = export(run_dir, format, out)
        assert described["input"] == {"name": "observations", "shape": [None, *observations.shape[1:]],
                                      "dtype": observations.dtype.name}
        assert described["actions"]["count"] == probe_env(spec.env)[2]
        assert described["source"]["step"] == spec.job.total_steps
        np.testing.assert_array_equal(play(out, observations), actions)  # the whole episode as one batch
        for index in range(0, len(actions), max(1, len(actions) // 10)):  # and observations one at a time
            assert play(out, observations[index:index + 1]).tolist() == [actions[index]]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 300-step CartPole run, for the tests below that need a run to export but not what it learned."""
    return trained(tmp_path_factory.mktemp("short"), cartpole_text(total_steps=300))


def test_onnx_without_its_extra_is_one_sentence(short_run: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "onnxscript.py").write_text('raise ModuleNotFoundError("No module named \'onnxscript\'", '
                                           'name="onnxscript")\n')
    monkeypatch.setenv("PYTHONPATH", f"{blocker}:{os.environ.get('PYTHONPATH', '')}")
    assert_one_line_error(run_rlsup("export", short_run, "--format", "onnx", "--out", tmp_path / "p.onnx"), 2,
                          "exporting to ONNX needs onnxscript, which is not installed: pip install 'rlsup[onnx]'")
    assert not (tmp_path / "p.onnx").exists()


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")
def test_the_description_has_the_models_mode(short_run: Path, tmp_path: Path) -> None:
    """Both files are the user's artefacts, shared alike: FILE.json was 0600 beside a 0644 model."""
    out = tmp_path / "policy.torchscript"
    export(short_run, "torchscript", out)
    umask = os.umask(0)
    os.umask(umask)
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (out, out.with_name(out.name + ".json"))}
    assert set(modes.values()) == {0o666 & ~umask}, modes
