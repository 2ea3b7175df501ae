"""What the CUDA tests share: their marks (skipped with a reason without a GPU) and comparisons of two runs."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import load_checkpoint

# Collection costs only the torch import the suite's other modules pay anyway: each test is skipped
# before anything runs (tests/integration/test_device_dry_run.py checks that the default suite stays fast).
NEEDS_CUDA = [pytest.mark.cuda,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="needs a CUDA GPU (bench/device/check.sh runs these on one)")]


def float_tensors(tree, where: str = "") -> dict[str, torch.Tensor]:
    """Every floating-point tensor of a checkpoint's state tree, by its path in the tree."""
    if isinstance(tree, dict):
        return {key: value for name, item in tree.items() for key, value in float_tensors(item, f"{where}/{name}").items()}
    if isinstance(tree, (list, tuple)):
        return {key: value for index, item in enumerate(tree)
                for key, value in float_tensors(item, f"{where}/{index}").items()}
    if isinstance(tree, torch.Tensor) and tree.is_floating_point():
        return {where: tree}
    return {}


def weight_difference(first_run: Path, second_run: Path) -> str:
    """The largest absolute difference between the two runs' final checkpoints' float tensors, and where."""
    first = float_tensors(load_checkpoint(latest_verified(first_run).path)[1])
    second = float_tensors(load_checkpoint(latest_verified(second_run).path)[1])
    differences = {key: (first[key].double() - second[key].double()).abs().max().item()
                   for key in first.keys() & second.keys() if first[key].shape == second[key].shape}
    where = max(differences, key=differences.get)
    return (f"largest absolute difference {differences[where]:.3g} at {where}; "
            f"{sum(value > 0 for value in differences.values())} of {len(differences)} tensors differ")
