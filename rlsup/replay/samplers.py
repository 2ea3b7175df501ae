"""Samplers choose which stored items a batch uses; storages hold the data they index."""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from rlsup.replay import elite
from rlsup.spec import ReplaySection

# Rounds of drawing and rejecting invalid rows before falling back to listing the valid ones:
# invalid rows are only a few near each ring's ends, so the fallback is for tiny storages.
REJECTION_ROUNDS = 16


class FeatureSource(Protocol):
    """The current network's view of stored items, which elite replay compares with what was stored."""

    def current_features(self, storage: Any, indices: np.ndarray) -> np.ndarray:
        """[n, D] float32, comparable with storage.features[indices]."""

    def current_logits(self, storage: Any, indices: np.ndarray) -> np.ndarray:
        """[n, ...] float32, comparable with storage.logits[indices] (kl_div only)."""


class Sampler(Protocol):
    """What every sampler offers the mixer and the checkpoint store; `step` is the job's environment step."""

    def sample(self, storage: Any, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


def draw_uniform(storage: Any, generator: np.random.Generator, count: int, n_step: int) -> np.ndarray:
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


class UniformSampler(GeneratorState):
    """Uniform with replacement over the valid items: the `standard` replay."""

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.generator = np.random.default_rng(generator)

    def sample(self, storage: Any, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray:
        return draw_uniform(storage, self.generator, count, n_step)

    def state_dict(self) -> dict:
        return self.generator_state()

    def load_state_dict(self, state: dict) -> None:
        self.load_generator_state(state)


class FifoSampler:
    """The `queue` replay: the oldest unconsumed unrolls, in order, each handed out once."""

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.consumed = 0  # unrolls handed out so far, counted against the storage's `added`

    def pending(self, storage: Any) -> int:
        """Unrolls added and not yet consumed."""
        return self.checked(storage).added - self.consumed

    def free(self, storage: Any) -> int:
        """Unrolls the queue can take before it would overwrite one not yet consumed."""
        return storage.capacity - self.pending(storage)

    def sample(self, storage: Any, count: int, n_step: int = 1,
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
    def checked(storage: Any) -> Any:
        if not hasattr(storage, "added"):
            raise TypeError(f"a queue consumes whole unrolls; {type(storage).__name__} has none")
        return storage

    def state_dict(self) -> dict:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        self.consumed = int(state["consumed"])


class ScoredSampler(GeneratorState):
    """Elite and attentive: a uniform candidate bucket of int(λ·n), scored, then a strategy picks n."""

    kind = "scored"

    def __init__(self, generator: np.random.Generator | int | None = None,
                 settings: ReplaySection | None = None) -> None:
        self.generator = np.random.default_rng(generator)
        self.settings = settings if settings is not None else ReplaySection(kind=self.kind)
        if self.settings.distance not in elite.DISTANCES or self.settings.strategy not in elite.STRATEGIES:
            raise ValueError(f"{self.kind} replay: unknown distance {self.settings.distance!r} or strategy "
                             f"{self.settings.strategy!r}")
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

    def sample(self, storage: Any, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray:
        self.check_source(features)
        self.check_storage(storage)
        self.step = step
        lambda_value = self.lambda_at(step)
        self.calls += 1
        bucket = draw_uniform(storage, self.generator, elite.candidate_count(lambda_value, count), n_step)
        if lambda_value == 1.0:
            chosen = bucket
        else:
            distinct, multiplicity = elite.distinct_candidates(bucket)
            ranking = elite.rank(distinct, multiplicity, self.distances(storage, distinct, features),
                                 storage.sample_counts(distinct))
            chosen = elite.select(self.settings.strategy, ranking, count, bucket).indices
        storage.record_draws(chosen)
        return chosen

    def insertion_slot(self, storage: Any, item_features: np.ndarray, item_logits: np.ndarray,
                       features: FeatureSource | None) -> int | None:
        """Elite insertion: once full, the farthest of `insertion_candidates` uniform draws; else None."""
        if not self.settings.elite_insertion or storage.stored_count() < storage.capacity:
            return None
        self.check_source(features)
        candidates = self.generator.integers(0, storage.capacity, self.settings.insertion_candidates)
        distances = self.insertion_distances(storage, candidates, item_features, item_logits, features)
        return elite.farthest(candidates, distances)

    def check_storage(self, storage: Any) -> None:
        vectors = "logits" if self.settings.distance == "kl_div" else "features"
        if getattr(storage, vectors, None) is None or not hasattr(storage, "record_draws"):
            raise ValueError(f"{self.kind} replay with distance {self.settings.distance} needs a storage that "
                             f"keeps {vectors} and draw counts; {type(storage).__name__} here keeps none")

    def check_source(self, features: FeatureSource | None) -> None:
        """Elite compares with the current network; attentive only with stored vectors, so needs none."""

    def distances(self, storage: Any, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        raise NotImplementedError

    def insertion_distances(self, storage: Any, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        raise NotImplementedError

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

    def check_source(self, features: FeatureSource | None) -> None:
        if features is None:
            raise ValueError("elite replay compares stored feature vectors with the current network's: "
                             "pass features=FeatureSource to sample")

    def distances(self, storage: Any, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        settings = self.settings
        if settings.distance == "kl_div":
            current, stored = features.current_logits(storage, indices), storage.logits[indices]
        else:
            current, stored = features.current_features(storage, indices), storage.features[indices]
        return elite.item_distances(settings.distance, current, stored, settings.p)

    def insertion_distances(self, storage: Any, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        return self.distances(storage, candidates, features)


class AttentiveSampler(ScoredSampler):
    """`attentive`: prefers candidates whose stored states are nearest the current state (the newest one)."""

    kind = "attentive"

    def distances(self, storage: Any, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        if self.settings.distance == "kl_div":
            reference, candidates = storage.newest_state_logits(), storage.state_logits(indices)
        else:
            reference, candidates = storage.newest_state_features(), storage.state_features(indices)
        return elite.reference_distances(self.settings.distance, reference, candidates, self.settings.p)

    def insertion_distances(self, storage: Any, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        # The unroll being inserted is about to be the newest: its last state is the reference.
        if self.settings.distance == "kl_div":
            reference, stored = np.asarray(item_logits)[-1], storage.state_logits(candidates)
        else:
            reference, stored = np.asarray(item_features)[-1], storage.state_features(candidates)
        return elite.reference_distances(self.settings.distance, reference, stored, self.settings.p)


# Replay kind (spec `[[replay]] kind`) to sampler class.
SAMPLERS: dict[str, Any] = {"standard": UniformSampler, "queue": FifoSampler, "elite": EliteSampler,
                            "attentive": AttentiveSampler}
