"""How elite and attentive replay measure stored items: shared by their samplers and their insertion writer."""
from __future__ import annotations

import numpy as np

from rlsup.replay import elite
from rlsup.replay.base import FeatureSource, ReplayStorage
from rlsup.spec import ReplaySection


class Scoring:
    """Distances of stored items for one [[replay]] table's distance and p; the kind decides to what."""

    kind = "scored"

    def __init__(self, settings: ReplaySection) -> None:
        if settings.distance not in elite.DISTANCES or settings.strategy not in elite.STRATEGIES:
            raise ValueError(f"{self.kind} replay: unknown distance {settings.distance!r} or strategy "
                             f"{settings.strategy!r}")
        self.settings = settings

    def check_source(self, features: FeatureSource | None) -> None:
        """Elite compares with the current network; attentive only with stored vectors, so needs none."""

    def distances(self, storage: ReplayStorage, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        """[n] how far each stored item is from what this kind prefers (nearest is drawn first)."""
        raise NotImplementedError

    def insertion_distances(self, storage: ReplayStorage, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        """[n] of slots that elite insertion may overwrite (the farthest is)."""
        raise NotImplementedError


class EliteScoring(Scoring):
    """`elite`: stored vectors against the current network's view of the same items (most on-policy nearest)."""

    kind = "elite"

    def check_source(self, features: FeatureSource | None) -> None:
        if features is None:
            raise ValueError("elite replay compares stored feature vectors with the current network's: "
                             "pass features=FeatureSource to sample")

    def distances(self, storage: ReplayStorage, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        settings = self.settings
        if settings.distance == "kl_div":
            current, stored = features.current_logits(storage, indices), storage.logits[indices]
        else:
            current, stored = features.current_features(storage, indices), storage.features[indices]
        return elite.item_distances(settings.distance, current, stored, settings.p)

    def insertion_distances(self, storage: ReplayStorage, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        return self.distances(storage, candidates, features)


class AttentiveScoring(Scoring):
    """`attentive`: stored states against the current state, the newest one (most similar to now nearest)."""

    kind = "attentive"

    def distances(self, storage: ReplayStorage, indices: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        if self.settings.distance == "kl_div":
            reference, candidates = storage.newest_state_logits(), storage.state_logits(indices)
        else:
            reference, candidates = storage.newest_state_features(), storage.state_features(indices)
        return elite.reference_distances(self.settings.distance, reference, candidates, self.settings.p)

    def insertion_distances(self, storage: ReplayStorage, candidates: np.ndarray, item_features: np.ndarray,
                            item_logits: np.ndarray, features: FeatureSource | None) -> np.ndarray:
        # The unroll being inserted is about to be the newest: its last state is the reference.
        if self.settings.distance == "kl_div":
            reference, stored = np.asarray(item_logits)[-1], storage.state_logits(candidates)
        else:
            reference, stored = np.asarray(item_features)[-1], storage.state_features(candidates)
        return elite.reference_distances(self.settings.distance, reference, stored, self.settings.p)


# Replay kinds that score their items, to their scoring.
SCORINGS: dict[str, type[Scoring]] = {"elite": EliteScoring, "attentive": AttentiveScoring}
