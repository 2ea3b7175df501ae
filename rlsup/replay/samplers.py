"""Samplers choose which stored items a batch uses, and say when a replay is ready; storages hold the data."""
from __future__ import annotations

import numpy as np

from rlsup.replay import elite
from rlsup.replay.base import FeatureSource, ReplayStorage, Sampler
from rlsup.replay.scoring import SCORINGS, Scoring
from rlsup.spec import ReplaySection

# Rounds of drawing and rejecting invalid rows before falling back to listing the valid ones:
# invalid rows are only a few near each ring's ends, so the fallback is for tiny storages.
REJECTION_ROUNDS = 16


def draw_uniform(storage: ReplayStorage, generator: np.random.Generator, count: int, n_step: int) -> np.ndarray:
    """`count` global indices, each drawn uniformly from the items gather can build now."""
    stored = storage.stored_count()
    if stored == 0:
        raise ValueError("cannot sample from an empty replay: no transitions stored yet")
    chosen = [np.empty(0, np.int64)]
    missing = count
    for _ in range(REJECTION_ROUNDS):
        if missing == 0:
            break
        # Uniform over stored rows, conditioned on validity, is uniform over valid rows.
        draws = storage.stored_indices(generator.integers(0, stored, missing))
        accepted = draws[storage.is_valid(draws, n_step)]
        chosen.append(accepted)
        missing -= len(accepted)
    if missing:
        valid = storage.valid_indices(n_step)
        if len(valid) == 0:
            raise ValueError(f"cannot sample from this replay: its {stored} stored rows hold "
                             f"no complete {n_step}-step transition yet")
        chosen.append(valid[generator.integers(0, len(valid), missing)])
    return np.concatenate(chosen)


class GeneratorState:
    """Checkpointing of a sampler's own random stream; the bit generator's state is JSON as it is."""

    generator: np.random.Generator

    def generator_state(self) -> dict:
        return {"bit_generator": self.generator.bit_generator.state}

    def load_generator_state(self, state: dict) -> None:
        saved = state["bit_generator"]
        ours = type(self.generator.bit_generator).__name__
        if saved.get("bit_generator") != ours:
            raise ValueError(f"sampler state is for bit generator {saved.get('bit_generator')!r}, "
                             f"this sampler uses {ours!r}")
        self.generator.bit_generator.state = saved


class UniformSampler(GeneratorState, Sampler):
    """Uniform with replacement over the valid items: the `standard` replay."""

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.generator = np.random.default_rng(generator)

    def sample(self, storage: ReplayStorage, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray:
        return draw_uniform(storage, self.generator, count, n_step)

    def state_dict(self) -> dict:
        return self.generator_state()

    def load_state_dict(self, state: dict) -> None:
        self.load_generator_state(state)


class FifoSampler(Sampler):
    """The `queue` replay: the oldest unconsumed unrolls, in order, each handed out once."""

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.consumed = 0  # unrolls handed out so far, counted against the storage's `added`

    def pending(self, storage: ReplayStorage) -> int:
        """Unrolls added and not yet consumed."""
        return self.checked(storage).added - self.consumed

    def available(self, storage: ReplayStorage, n_step: int = 1) -> int:
        return self.pending(storage)

    def available_floor(self, storage: ReplayStorage, n_step: int = 1) -> int:
        return 0  # pending() is cheap and is the count: no bound needed

    def default_minimum(self, capacity: int, share: int) -> int:
        """A queue waits until it is full."""
        return capacity

    def free(self, storage: ReplayStorage) -> int:
        """Unrolls the queue can take before it would overwrite one not yet consumed."""
        return storage.capacity - self.pending(storage)

    def drop_oldest(self, storage: ReplayStorage) -> None:
        """A full queue gives up its oldest unconsumed unroll, unread."""
        if self.free(storage) == 0:
            self.consumed += 1

    def sample(self, storage: ReplayStorage, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray:
        pending = self.pending(storage)
        if pending == 0:
            raise ValueError("cannot sample from an empty replay: the queue holds no unconsumed unrolls")
        if count > pending:
            raise ValueError(f"the queue holds {pending} unconsumed unrolls, fewer than the {count} asked "
                             "for; wait until it is ready")
        # Without elite insertion a ring's slots fill in order, so the k-th unroll ever added is in slot k % capacity.
        indices = (self.consumed + np.arange(count, dtype=np.int64)) % storage.capacity
        self.consumed += count
        return indices

    @staticmethod
    def checked(storage: ReplayStorage) -> ReplayStorage:
        if storage.item != "unrolls":
            raise TypeError(f"a queue consumes whole unrolls; {type(storage).__name__} has none")
        return storage

    def state_dict(self) -> dict:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        self.consumed = int(state["consumed"])


class ScoredSampler(GeneratorState, Sampler):
    """Elite and attentive: a uniform candidate bucket of int(λ·n), scored, then a strategy picks n."""

    kind = "scored"

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.generator = np.random.default_rng(generator)
        self.settings = settings if settings is not None else ReplaySection(kind=self.kind)
        self.scoring: Scoring = SCORINGS[self.kind](self.settings)
        self.calls = 0  # sample calls so far, for whoever reads a checkpoint
        self.step = 0  # the environment step of the latest call: λ is a function of it

    def lambda_at(self, step: int) -> float:
        settings = self.settings
        return elite.annealed_lambda(settings.lambda_batch_multiplier, settings.alpha_annealing_factor,
                                     settings.anneal_steps, step)

    @property
    def lambda_value(self) -> float:
        """λ of the latest sample call (λ₀ before the first)."""
        return self.lambda_at(self.step)

    def metrics(self) -> dict[str, float]:
        return {"lambda": self.lambda_value}

    def sample(self, storage: ReplayStorage, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray:
        self.scoring.check_source(features)
        self.check_storage(storage)
        self.step = step
        lambda_value = self.lambda_at(step)
        self.calls += 1
        bucket = draw_uniform(storage, self.generator, elite.candidate_count(lambda_value, count), n_step)
        if lambda_value == 1.0:
            chosen = bucket
        else:
            distinct, multiplicity = elite.distinct_candidates(bucket)
            ranking = elite.rank(distinct, multiplicity, self.scoring.distances(storage, distinct, features),
                                 storage.sample_counts(distinct))
            chosen = elite.select(self.settings.strategy, ranking, count, bucket).indices
        storage.record_draws(chosen)
        return chosen

    def check_storage(self, storage: ReplayStorage) -> None:
        vectors = "logits" if self.settings.distance == "kl_div" else "features"
        if getattr(storage, vectors) is None:
            raise ValueError(f"{self.kind} replay with distance {self.settings.distance} needs a storage that "
                             f"keeps {vectors} and draw counts; {type(storage).__name__} here keeps none")

    def state_dict(self) -> dict:
        # λ is saved for whoever reads the checkpoint; loading recomputes it from the step.
        return {**self.generator_state(), "calls": self.calls, "step": self.step, "lambda": self.lambda_value}

    def load_state_dict(self, state: dict) -> None:
        self.load_generator_state(state)
        self.calls = int(state["calls"])
        self.step = int(state.get("step", 0))


class EliteSampler(ScoredSampler):
    """`elite`: prefers candidates whose stored vectors the current network still reproduces (most on-policy)."""

    kind = "elite"


class AttentiveSampler(ScoredSampler):
    """`attentive`: prefers candidates whose stored states are nearest the current state (the newest one)."""

    kind = "attentive"


# Replay kind (spec `[[replay]] kind`) to sampler class.
SAMPLERS: dict[str, type[Sampler]] = {"standard": UniformSampler, "queue": FifoSampler, "elite": EliteSampler,
                            "attentive": AttentiveSampler}
