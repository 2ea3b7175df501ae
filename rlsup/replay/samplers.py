"""Samplers choose which stored items a batch uses; storages hold the data they index."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rlsup.replay.storage import TransitionStorage

# Rounds of drawing and rejecting invalid rows before falling back to listing the valid ones:
# invalid rows are only a few near each ring's ends, so the fallback is for tiny storages.
REJECTION_ROUNDS = 16


class Sampler(Protocol):
    """What every sampler offers the mixer and the checkpoint store."""

    def sample(self, storage: TransitionStorage, count: int, n_step: int) -> np.ndarray: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class UniformSampler:
    """Uniform with replacement over the valid items: the `standard` replay."""

    def __init__(self, generator: np.random.Generator | int | None = None) -> None:
        self.generator = np.random.default_rng(generator)

    def sample(self, storage: TransitionStorage, count: int, n_step: int) -> np.ndarray:
        """`count` global indices, each drawn uniformly from the transitions gather can build now."""
        stored = storage.stored_count()
        if stored == 0:
            raise ValueError("cannot sample from an empty replay: no transitions stored yet")
        chosen = [np.empty(0, np.int64)]
        missing = count
        for _ in range(REJECTION_ROUNDS):
            if missing == 0:
                break
            # Uniform over stored rows, conditioned on validity, is uniform over valid rows.
            draws = storage.stored_indices(self.generator.integers(0, stored, missing))
            accepted = draws[storage.is_valid(draws, n_step)]
            chosen.append(accepted)
            missing -= len(accepted)
        if missing:
            chosen.append(self.draw_from_valid(storage, missing, n_step))
        return np.concatenate(chosen)

    def draw_from_valid(self, storage: TransitionStorage, count: int, n_step: int) -> np.ndarray:
        valid = storage.valid_indices(n_step)
        if len(valid) == 0:
            raise ValueError(f"cannot sample from this replay: its {storage.stored_count()} stored rows hold "
                             f"no complete {n_step}-step transition yet")
        return valid[self.generator.integers(0, len(valid), count)]

    def state_dict(self) -> dict:
        # The bit generator's state is a dict of str and int, so it goes to JSON as it is.
        return {"bit_generator": self.generator.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        saved = state["bit_generator"]
        ours = type(self.generator.bit_generator).__name__
        if saved.get("bit_generator") != ours:
            raise ValueError(f"sampler state is for bit generator {saved.get('bit_generator')!r}, "
                             f"this sampler uses {ours!r}")
        self.generator.bit_generator.state = saved


# Replay kind (spec `[[replay]] kind`) to sampler class; elite, attentive and queue samplers join here.
SAMPLERS: dict[str, Any] = {"standard": UniformSampler}
