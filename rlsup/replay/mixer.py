"""Replays mixed by ratio: every learner batch takes a fixed whole share from each replay."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rlsup.replay.samplers import SAMPLERS, Sampler
from rlsup.replay.storage import TransitionBatch, TransitionStorage

# Ratios come from TOML floats (0.1 + 0.2 != 0.3), so sums and shares are compared with this slack.
RATIO_TOLERANCE = 1e-9


@dataclass
class Replay:
    """One replay of a job: where items live, how they are picked, and its share of each batch."""

    kind: str
    capacity: int
    ratio: float
    storage: TransitionStorage
    sampler: Sampler

    @property
    def name(self) -> str:
        return f"{self.kind} replay (capacity {self.capacity}, ratio {self.ratio})"


def make_replay(kind: str, capacity: int, ratio: float, *, num_envs: int, frame_shape: tuple,
                frame_dtype: Any, stack_size: int, generator: np.random.Generator | int | None) -> Replay:
    """A replay of transitions whose sampler is the one registered for its kind."""
    if kind not in SAMPLERS:
        raise ValueError(f"unknown replay kind {kind!r}; known: {sorted(SAMPLERS)}")
    storage = TransitionStorage(capacity, num_envs, frame_shape, frame_dtype, stack_size)
    return Replay(kind, capacity, ratio, storage, SAMPLERS[kind](generator))


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
        shares.append(whole)
    return shares


def concatenate_batches(batches: Sequence[TransitionBatch]) -> TransitionBatch:
    if len(batches) == 1:
        return batches[0]
    return TransitionBatch(**{name: np.concatenate([getattr(batch, name) for batch in batches])
                              for name in TransitionBatch.__dataclass_fields__})


class ReplayMixer:
    """Fans every transition out to all replays and draws each batch from them by ratio."""

    def __init__(self, replays: Sequence[Replay], batch_size: int) -> None:
        self.replays = list(replays)
        self.batch_size = batch_size
        self.shares = batch_shares(self.replays, batch_size)

    def add_step(self, env: int, frame: Any, action: int, reward: float, terminal: bool, first: bool) -> None:
        for replay in self.replays:
            replay.storage.add_step(env, frame, action, reward, terminal, first)

    def add_final(self, env: int, frame: Any) -> None:
        for replay in self.replays:
            replay.storage.add_final(env, frame)

    def ready(self, min_items: int | Sequence[int], n_step: int = 1) -> bool:
        """Whether every replay holds enough sampleable transitions (one minimum, or one per replay)."""
        minimums = [min_items] * len(self.replays) if isinstance(min_items, int) else list(min_items)
        if len(minimums) != len(self.replays):
            raise ValueError(f"{len(minimums)} minimums for {len(self.replays)} replays")
        return all(replay.storage.valid_count(n_step) >= minimum
                   for replay, minimum in zip(self.replays, minimums))

    def sample(self, batch_size: int, n_step: int, gamma: float) -> TransitionBatch:
        """A batch made of each replay's share, concatenated in replay order."""
        shares = self.shares if batch_size == self.batch_size else batch_shares(self.replays, batch_size)
        batches = []
        for replay, share in zip(self.replays, shares):
            indices = replay.sampler.sample(replay.storage, share, n_step)
            batches.append(replay.storage.gather(indices, n_step, gamma))
        return concatenate_batches(batches)

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
