"""Random-stream states: restoring them, also through a real checkpoint, gives the same draws."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from rlsup.checkpoint.rng import generator_state, global_rng_state, restore_generator, restore_global_rng_state
from rlsup.checkpoint.store import load_checkpoint, write_checkpoint


def through_checkpoint(tmp_path, state: dict) -> dict:
    """state after a real write and load: JSON, tensors.pt and nothing pickled."""
    entry = write_checkpoint(tmp_path, {"rng": state}, step=1, episodes=0, reason="interval", fingerprint="",
                             spec_sha256="", metrics_bytes=0, keep=1)
    return load_checkpoint(entry.path)[1]["rng"]


@pytest.mark.parametrize("bit_generator", ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"])
def test_generator_restores_class_and_draws(tmp_path, bit_generator):
    generator = np.random.Generator(getattr(np.random, bit_generator)(1234))
    generator.standard_normal(3)  # leaves a cached half of a draw behind in some generators
    generator.integers(0, 10, size=5)
    state = generator_state(generator)
    json.dumps(state)  # JSON-able as it is, big ints included

    restored = restore_generator(through_checkpoint(tmp_path, state))
    assert type(restored.bit_generator) is type(generator.bit_generator)
    np.testing.assert_array_equal(restored.random(20), generator.random(20))
    np.testing.assert_array_equal(restored.integers(0, 2 ** 40, size=7), generator.integers(0, 2 ** 40, size=7))


def test_restore_refuses_names_that_are_not_bit_generators():
    with pytest.raises(ValueError, match="unknown numpy bit generator"):
        restore_generator({"bit_generator": "Generator", "state": {}})


def draws() -> tuple:
    return (random.random(), random.gauss(0, 1), random.getrandbits(70), np.random.random(4).tolist(),
            np.random.standard_normal(), torch.rand(5), torch.randint(0, 1000, (3,)))


def assert_same_draws(first: tuple, second: tuple) -> None:
    assert first[:5] == second[:5]
    assert torch.equal(first[5], second[5]) and torch.equal(first[6], second[6])


def test_global_streams_restore_to_the_same_draws(tmp_path):
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    random.gauss(0, 1)  # leaves gauss_next set, part of Python's state
    np.random.standard_normal()  # leaves numpy's cached gaussian set
    state = global_rng_state()
    expected = draws()

    restore_global_rng_state(through_checkpoint(tmp_path, state))
    assert_same_draws(draws(), expected)


def test_global_restore_tolerates_missing_cuda_states():
    state = global_rng_state()
    state.pop("cuda")
    expected = draws()
    restore_global_rng_state(state)
    assert_same_draws(draws(), expected)
    if not torch.cuda.is_available():
        restore_global_rng_state({**state, "cuda": [torch.zeros(16, dtype=torch.uint8)]})
        assert_same_draws(draws(), expected)
