"""rlsup export of a continuous policy (SAC on Pendulum-v1): the model's actions are enjoy's, within the bounds the
JSON beside it names, in TorchScript and in ONNX (through onnxruntime)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from rlsup_testing import recorded_play, run_rlsup, trained_to_budget


SAC = """
[job]
algo = "sac"
seed = 2
total_steps = 800
threads = 1

[env]
id = "Pendulum-v1"

[sac]
batch_size = 32
learning_starts = 200
hidden_sizes = [32, 32]

[[replay]]
capacity = 1_000
"""


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sac-export")
    job = directory / "job.toml"
    job.write_text(SAC)
    return trained_to_budget(job, directory / "run")


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated")
def test_an_exported_continuous_policy_plays_enjoys_actions(sac_run: Path, tmp_path: Path) -> None:
    observations, actions = recorded_play(sac_run, 2)
    assert actions.shape == (len(observations), 1) and np.unique(actions).size > 10
    assert (np.abs(actions) <= 2.0).all()  # Pendulum's bounds: the squashed mean never leaves them
    for format in ("torchscript", "onnx"):
        out = tmp_path / f"policy.{format}"
        result = run_rlsup("export", sac_run, "--format", format, "--out", out)
        assert result.returncode == 0, result.stderr
        described = json.loads(out.with_name(out.name + ".json").read_text())
        assert described["actions"] == {"kind": "continuous", "count": 1, "low": [-2.0], "high": [2.0]}
        if format == "torchscript":
            model = torch.jit.load(str(out))
            # One observation at a time, as enjoy played them: the same kernels, so the same floats.
            played = np.concatenate([model(torch.as_tensor(row[None])).numpy() for row in observations])
            np.testing.assert_array_equal(played, actions)
            # A batch may take other matrix kernels, which round otherwise in the last bits.
            np.testing.assert_allclose(model(torch.as_tensor(observations)).numpy(), actions, rtol=1e-6, atol=1e-6)
        else:
            session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
            played = session.run(["actions"], {"observations": observations})[0]
            np.testing.assert_allclose(played, actions, rtol=1e-5, atol=1e-5)  # onnxruntime's own kernels
