"""Replays mixed by ratio: every learner batch takes a fixed whole share from each replay."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence, Union

import numpy as np

from rlsup.replay.samplers import SAMPLERS, FeatureSource, FifoSampler, Sampler, ScoredSampler
from rlsup.replay.storage import TransitionBatch, TransitionStorage
from rlsup.replay.unrolls import UnrollBatch, UnrollStorage, concatenate_unroll_batches
from rlsup.spec import ReplaySection

# Ratios come from TOML floats (0.1 + 0.2 != 0.3), so sums and shares are compared with this slack.
RATIO_TOLERANCE = 1e-9
# What a replay holds: DQN transitions or V-trace unrolls, and the storage class for each.
STORAGES: dict[str, Any] = {"transitions": TransitionStorage, "unrolls": UnrollStorage}
# Default readiness of replays other than queues: this share of capacity, or this many batch shares.
READY_CAPACITY_FRACTION = 0.2
READY_SHARES = 10

Batch = Union[TransitionBatch, UnrollBatch]


@dataclass
class Replay:
    """One replay of a job: where items live, how they are picked, and its share of each batch."""

    kind: str
    capacity: int
    ratio: float
    storage: Any  # TransitionStorage or UnrollStorage
    sampler: Sampler
    min_size: int = 0  # items needed before sampling; 0 picks the default of default_minimum

    @property
    def name(self) -> str:
        return f"{self.kind} replay (capacity {self.capacity}, ratio {self.ratio})"

    @property
    def item(self) -> str:
        return "unrolls" if isinstance(self.storage, UnrollStorage) else "transitions"

    def default_minimum(self, share: int) -> int:
        """A queue waits until full; others for max(20% of capacity, 10 shares), at most their capacity."""
        if self.min_size:
            return self.min_size
        if isinstance(self.sampler, FifoSampler):
            return self.capacity
        return min(self.capacity, max(math.ceil(READY_CAPACITY_FRACTION * self.capacity), READY_SHARES * share))

    def available(self, n_step: int) -> int:
        """Items a draw can use now: unconsumed unrolls for a queue, valid items otherwise."""
        if isinstance(self.sampler, FifoSampler):
            return self.sampler.pending(self.storage)
        return self.storage.valid_count(n_step)

    def free(self) -> int | None:
        """Unrolls a queue can take before overwriting unconsumed ones; None for replays that never block."""
        return self.sampler.free(self.storage) if isinstance(self.sampler, FifoSampler) else None


def make_replay(kind: str, capacity: int, ratio: float, *, generator: np.random.Generator | int | None,
                item: str = "transitions", min_size: int = 0, settings: ReplaySection | None = None,
                **storage_arguments: Any) -> Replay:
    """A replay of transitions or unrolls whose sampler is the one registered for its kind.

    storage_arguments go to the storage: for transitions num_envs, frame_shape, frame_dtype,
    stack_size (and feature_size, num_actions for elite/attentive); for unrolls unroll_length,
    observation_shape, observation_dtype, num_actions, feature_size. `settings` carries the
    elite/attentive options (strategy, distance, λ, …); the spec's defaults when left out.
    """
    if kind not in SAMPLERS:
        raise ValueError(f"unknown replay kind {kind!r}; known: {sorted(SAMPLERS)}")
    if item not in STORAGES:
        raise ValueError(f"unknown replay item {item!r}; known: {sorted(STORAGES)}")
    if kind == "queue" and item != "unrolls":
        raise ValueError("a queue replay holds unrolls (vtrace); transitions use standard, elite or attentive")
    if min_size > capacity:
        raise ValueError(f"{kind} replay: min_size {min_size} exceeds its capacity {capacity}; "
                         "it would never be ready")
    settings = settings if settings is not None else ReplaySection(kind=kind)
    if settings.elite_insertion and item != "unrolls" and kind in ("elite", "attentive"):
        # Transition rows are consecutive frames of an episode: overwriting one in the middle
        # would break the stacks and n-step windows of its neighbours.
        raise ValueError(f"{kind} replay: elite_insertion works on unrolls only, not on transitions")
    storage = STORAGES[item](capacity, **storage_arguments)
    return Replay(kind, capacity, ratio, storage, SAMPLERS[kind](generator, settings), min_size)


def replay_from_settings(settings: ReplaySection, *, generator: np.random.Generator | int | None,
                         item: str = "transitions", **storage_arguments: Any) -> Replay:
    """make_replay from one [[replay]] table."""
    return make_replay(settings.kind, settings.capacity, settings.ratio, generator=generator, item=item,
                       min_size=settings.min_size, settings=settings, **storage_arguments)


def batch_shares(replays: Sequence[Replay], batch_size: int) -> list[int]:
    """Items each replay gives a batch of batch_size; refuses ratios that do not split it whole."""
    if not replays:
        raise ValueError("a replay mixer needs at least one replay")
    total = sum(replay.ratio for replay in replays)
    if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=RATIO_TOLERANCE):
        listed = ", ".join(f"replay {number} ({replay.kind}): {replay.ratio}"
                           for number, replay in enumerate(replays))
        raise ValueError(f"replay ratios must sum to 1, these sum to {total}: {listed}")
    shares = []
    for number, replay in enumerate(replays):
        share = replay.ratio * batch_size
        whole = round(share)
        if replay.ratio <= 0 or whole < 1 or abs(share - whole) > RATIO_TOLERANCE * batch_size:
            raise ValueError(f"replay {number} ({replay.kind}): ratio {replay.ratio} × batch {batch_size} "
                             f"= {share:g} items, which must be a whole number of at least 1")
        if replay.kind == "queue" and replay.capacity < whole:
            raise ValueError(f"replay {number} (queue): capacity {replay.capacity} is below its share of "
                             f"{whole} unrolls per batch, so it could never fill one")
        shares.append(whole)
    return shares


def concatenate_batches(batches: Sequence[Batch]) -> Batch:
    if len(batches) == 1:
        return batches[0]
    if isinstance(batches[0], UnrollBatch):
        return concatenate_unroll_batches(list(batches))
    return TransitionBatch(**{name: np.concatenate([getattr(batch, name) for batch in batches])
                              for name in TransitionBatch.__dataclass_fields__})


class QueueFull(ValueError):
    """An unroll was offered while a queue held `capacity` unconsumed ones: the learner must sample first."""


class ReplayMixer:
    """Fans every item out to all replays and draws each batch from them by ratio."""

    def __init__(self, replays: Sequence[Replay], batch_size: int) -> None:
        self.replays = list(replays)
        self.batch_size = batch_size
        self.shares = batch_shares(self.replays, batch_size)
        items = {replay.item for replay in self.replays}
        if len(items) > 1:
            raise ValueError(f"replays of one mixer must hold the same items, these hold {sorted(items)}")
        self.item = items.pop()

    # -- writing -----------------------------------------------------------------------------

    def add_step(self, env: int, frame: Any, action: int, reward: float, terminal: bool, first: bool,
                 features: Any = None, logits: Any = None) -> None:
        """One transition row to every replay; features and logits go to the storages that keep them."""
        for replay in self.replays:
            storage = replay.storage
            storage.add_step(env, frame, action, reward, terminal, first,
                             features if storage.feature_size is not None else None,
                             logits if storage.num_actions is not None else None)

    def add_final(self, env: int, frame: Any) -> None:
        for replay in self.replays:
            replay.storage.add_final(env, frame)

    def free(self) -> int | None:
        """Unrolls that can be added now without a queue overwriting unconsumed ones (None: no queue)."""
        frees = [free for replay in self.replays if (free := replay.free()) is not None]
        return min(frees) if frees else None

    def add_unroll(self, observations: Any, actions: Any, rewards: Any, dones: Any, behaviour_logits: Any,
                   features: Any, feature_source: FeatureSource | None = None) -> list[int]:
        """One unroll to every replay (its index in each); raises QueueFull, adding nowhere, if a queue is full.

        feature_source is needed by elite replays with elite_insertion once they are full.
        """
        if self.free() == 0:
            raise QueueFull("a queue replay is full of unconsumed unrolls; sample a batch before adding more")
        indices = []
        for replay in self.replays:
            slot = None
            if isinstance(replay.sampler, ScoredSampler):
                slot = replay.sampler.insertion_slot(replay.storage, features, behaviour_logits, feature_source)
            indices.append(replay.storage.add(observations, actions, rewards, dones, behaviour_logits, features,
                                              slot=slot))
        return indices

    # -- reading -----------------------------------------------------------------------------

    def ready(self, min_items: int | Sequence[int] | None = None, n_step: int = 1) -> bool:
        """Whether every replay holds enough items: one minimum, one per replay, or each one's default."""
        if min_items is None:
            minimums = [replay.default_minimum(share) for replay, share in zip(self.replays, self.shares)]
        elif isinstance(min_items, int):
            minimums = [min_items] * len(self.replays)
        else:
            minimums = list(min_items)
        if len(minimums) != len(self.replays):
            raise ValueError(f"{len(minimums)} minimums for {len(self.replays)} replays")
        return all(replay.available(n_step) >= minimum for replay, minimum in zip(self.replays, minimums))

    def sample(self, batch_size: int, n_step: int = 1, gamma: float = 1.0,
               features: FeatureSource | None = None, step: int = 0) -> Batch:
        """A batch made of each replay's share, concatenated in replay order (n_step, gamma: transitions;
        step: the job's environment step, which anneals elite and attentive λ)."""
        shares = self.shares if batch_size == self.batch_size else batch_shares(self.replays, batch_size)
        batches = []
        for replay, share in zip(self.replays, shares):
            indices = replay.sampler.sample(replay.storage, share, n_step, features, step)
            batches.append(replay.storage.gather(indices, n_step, gamma))
        return concatenate_batches(batches)

    # -- checkpoint contract -----------------------------------------------------------------

    def state_dict(self) -> dict:
        return {str(number): {"kind": replay.kind, "capacity": replay.capacity,
                              "storage": replay.storage.state_dict(), "sampler": replay.sampler.state_dict()}
                for number, replay in enumerate(self.replays)}

    def load_state_dict(self, state: dict) -> None:
        expected = [str(number) for number in range(len(self.replays))]
        if sorted(state) != sorted(expected):
            raise ValueError(f"replay state holds replays {sorted(state)}, this job has {expected}")
        for number, replay in enumerate(self.replays):
            part = state[str(number)]
            if (part.get("kind"), part.get("capacity")) != (replay.kind, replay.capacity):
                raise ValueError(f"replay {number}: saved as {part.get('kind')} with capacity "
                                 f"{part.get('capacity')}, this job has {replay.name}")
            replay.storage.load_state_dict(part["storage"])
            replay.sampler.load_state_dict(part["sampler"])
