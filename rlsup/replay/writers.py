"""Writers put items into a storage and choose where: the next slot, or the slot elite insertion picks."""
from __future__ import annotations

from typing import Any

import numpy as np

from rlsup.replay import elite
from rlsup.replay.base import FeatureSource, Writer
from rlsup.replay.scoring import SCORINGS
from rlsup.spec import ReplaySection


class RingWriter(Writer):
    """Every item to the storage's next slot, overwriting the oldest once full."""

    def add_step(self, storage: Any, env: int, frame: Any, action: int, reward: float, terminal: bool,
                 first: bool, features: Any = None, logits: Any = None) -> None:
        # Every replay is offered the same row; each storage keeps only the vectors it was made for.
        storage.add_step(env, frame, action, reward, terminal, first,
                         features if storage.feature_size is not None else None,
                         logits if storage.num_actions is not None else None)

    def add_final(self, storage: Any, env: int, frame: Any) -> None:
        storage.add_final(env, frame)

    def add_unroll(self, storage: Any, observations: Any, actions: Any, rewards: Any, dones: Any,
                   behaviour_logits: Any, features: Any, feature_source: FeatureSource | None = None) -> int:
        slot = self.slot(storage, features, behaviour_logits, feature_source)
        return storage.add(observations, actions, rewards, dones, behaviour_logits, features, slot=slot)

    def slot(self, storage: Any, item_features: Any, item_logits: Any,
             feature_source: FeatureSource | None) -> int | None:
        """Where the next unroll goes; None: the storage's own next slot."""
        return None


class EliteInsertionWriter(RingWriter):
    """Elite insertion: once full, overwrite the farthest of `insertion_candidates` uniform draws.

    Its candidates come from the replay's one random stream, which its sampler draws from too and
    checkpoints: insertions and draws then interleave on resume exactly as they did.
    """

    def __init__(self, generator: np.random.Generator, settings: ReplaySection) -> None:
        self.generator = generator
        self.settings = settings
        self.scoring = SCORINGS[settings.kind](settings)

    def slot(self, storage: Any, item_features: Any, item_logits: Any,
             feature_source: FeatureSource | None) -> int | None:
        if storage.stored_count() < storage.capacity:
            return None
        self.scoring.check_source(feature_source)
        candidates = self.generator.integers(0, storage.capacity, self.settings.insertion_candidates)
        distances = self.scoring.insertion_distances(storage, candidates, item_features, item_logits,
                                                     feature_source)
        return elite.farthest(candidates, distances)


def make_writer(settings: ReplaySection, generator: np.random.Generator) -> Writer:
    """The writer a [[replay]] table asks for: elite insertion where its kind scores items, else the ring."""
    if settings.elite_insertion and settings.kind in SCORINGS:
        return EliteInsertionWriter(generator, settings)
    return RingWriter()
