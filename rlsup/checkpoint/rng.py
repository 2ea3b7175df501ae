"""Random-stream states as checkpointable trees (JSON values and tensors, never pickled objects)."""
from __future__ import annotations

import random

import numpy as np

# torch is imported by the functions that use it: env processes import this module for numpy generator
# states only, and importing torch would be 2 s of their 2.4 s start-up.


def _plain(value):
    """bit_generator.state with its arrays turned into lists of ints; the setters accept sequences back."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def generator_state(generator: np.random.Generator) -> dict:
    """The state of a numpy Generator (its bit generator's name and state; big ints are fine in JSON)."""
    return _plain(generator.bit_generator.state)


def _bit_generator_class(name: object) -> type:
    # Look the name up among numpy's bit generators only: a checkpoint names a class, it never supplies one.
    candidate = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(candidate, type) and issubclass(candidate, np.random.BitGenerator)):
        raise ValueError(f"unknown numpy bit generator {name!r}")
    return candidate


def restore_generator(state: dict) -> np.random.Generator:
    """A Generator with the same bit generator class and state as the one state was taken from."""
    bit_generator = _bit_generator_class(state.get("bit_generator"))()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _python_state() -> dict:
    version, internal, gauss_next = random.getstate()
    return {"version": version, "internal": list(internal), "gauss_next": gauss_next}


def _restore_python(state: dict) -> None:
    random.setstate((state["version"], tuple(state["internal"]), state["gauss_next"]))


def _cuda_states() -> list:
    import torch

    # Only once this process has used CUDA: asking earlier would create a context on every visible GPU
    # for a run that may never touch one, and an unused generator still holds its seeded state.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return list(torch.cuda.get_rng_state_all())
    return []


def global_rng_state() -> dict:
    """Python's random, numpy's legacy global RandomState, torch's CPU generator and each CUDA device's."""
    import torch

    return {"python": _python_state(), "numpy": _plain(np.random.get_state(legacy=False)),
            "torch": torch.get_rng_state(), "cuda": _cuda_states()}


def restore_global_rng_state(state: dict) -> None:
    """Inverse of global_rng_state; CUDA states are skipped when there is no GPU, and extra ones dropped
    when there are fewer GPUs now than when they were saved."""
    import torch

    _restore_python(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda") or []
    if cuda and torch.cuda.is_available():
        for device, device_state in enumerate(cuda[:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(device_state, device)
