"""Replays mixed by ratio: every learner batch takes a fixed whole share from each replay."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence, Union

import numpy as np

from rlsup.replay.base import FeatureSource, ReplayStorage, Sampler, Writer
from rlsup.replay.samplers import SAMPLERS
from rlsup.replay.storage import TransitionBatch, TransitionStorage
from rlsup.replay.unrolls import UnrollBatch, UnrollStorage
from rlsup.replay.writers import RingWriter, make_writer
from rlsup.spec import ReplaySection, Violation, item_violations, share_violations, whole_shares

# What a replay holds: DQN transitions or V-trace unrolls, and the storage class for each.
STORAGES: dict[str, type[ReplayStorage]] = {"transitions": TransitionStorage, "unrolls": UnrollStorage}

Batch = Union[TransitionBatch, UnrollBatch]


@dataclass
class Replay:
    """One replay of a job: where items live, how they are picked and written, and its share of each batch."""

    kind: str
    capacity: int
    ratio: float
    storage: ReplayStorage
    sampler: Sampler
    min_size: int = 0  # items needed before sampling; 0 picks the sampler's default_minimum
    writer: Writer = field(default_factory=RingWriter)

    @property
    def name(self) -> str:
        return f"{self.kind} replay (capacity {self.capacity}, ratio {self.ratio})"

    @property
    def item(self) -> str:
        return self.storage.item

    def default_minimum(self, share: int) -> int:
        """min_size, or when 0 the sampler's default: a queue waits until full, others for a good part."""
        return self.min_size or self.sampler.default_minimum(self.capacity, share)

    def ready(self, minimum: int, n_step: int = 1) -> bool:
        return self.sampler.ready(self.storage, minimum, n_step)

    def free(self) -> int | None:
        """Items the replay can take before overwriting undrawn ones; None for replays that never block."""
        return self.sampler.free(self.storage)

    # -- checkpoint contract -----------------------------------------------------------------

    def state_dict(self) -> dict:
        return {"kind": self.kind, "capacity": self.capacity, "storage": self.storage.state_dict(),
                "sampler": self.sampler.state_dict(), "writer": self.writer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])
        self.writer.load_state_dict(state.get("writer", {}))  # checkpoints from before writers have none


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
    settings = settings if settings is not None else ReplaySection(kind=kind)
    table = dataclasses.replace(settings, kind=kind, capacity=capacity, ratio=ratio, min_size=min_size)
    refuse(item_violations(0, table, item), [kind], prefix=f"{kind} replay")
    storage = STORAGES[item](capacity, **storage_arguments)
    # One random stream per replay: the sampler's draws and elite insertion's candidates, in call order.
    generator = np.random.default_rng(generator)
    return Replay(kind, capacity, ratio, storage, SAMPLERS[kind](generator, settings), min_size,
                  make_writer(table, generator))


def replay_from_settings(settings: ReplaySection, *, generator: np.random.Generator | int | None,
                         item: str = "transitions", **storage_arguments: Any) -> Replay:
    """make_replay from one [[replay]] table."""
    return make_replay(settings.kind, settings.capacity, settings.ratio, generator=generator, item=item,
                       min_size=settings.min_size, settings=settings, **storage_arguments)


def batch_shares(replays: Sequence[Replay], batch_size: int) -> list[int]:
    """Items each replay gives a batch of batch_size; refuses ratios that do not split it whole (the spec's rules)."""
    if not replays:
        raise ValueError("a replay mixer needs at least one replay")
    refuse(share_violations(replays, batch_size), [replay.kind for replay in replays])
    return whole_shares(replays, batch_size)


def refuse(violations: list[Violation], kinds: list[str], prefix: str = "") -> None:
    """Raise the spec's rule violations as one ValueError, each naming its replay."""
    if not violations:
        return
    lines = []
    for violation in violations:
        name = prefix or (f"replay {violation.table} ({kinds[violation.table]})" if violation.table is not None
                          else "")
        lines.append(f"{name}: {violation.message}" if name else violation.message)
    raise ValueError("\n".join(lines))


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
            replay.writer.add_step(replay.storage, env, frame, action, reward, terminal, first, features, logits)

    def add_final(self, env: int, frame: Any) -> None:
        for replay in self.replays:
            replay.writer.add_final(replay.storage, env, frame)

    def free(self) -> int | None:
        """Unrolls that can be added now without a queue overwriting unconsumed ones (None: no queue)."""
        frees = [free for replay in self.replays if (free := replay.free()) is not None]
        return min(frees) if frees else None

    def drop_oldest_queued(self) -> None:
        """Warm-up: a full queue gives up its oldest unroll while another replay is still filling.

        Every unroll goes to all replays, and a queue that refused them until, say, an elite replay
        reached its minimum would never let that replay fill. The dropped unroll is in the others.
        """
        for replay in self.replays:
            replay.sampler.drop_oldest(replay.storage)

    def add_unroll(self, observations: Any, actions: Any, rewards: Any, dones: Any, behaviour_logits: Any,
                   features: Any, feature_source: FeatureSource | None = None) -> list[int]:
        """One unroll to every replay (its index in each); raises QueueFull, adding nowhere, if a queue is full.

        feature_source is needed by elite replays with elite_insertion once they are full.
        """
        if self.free() == 0:
            raise QueueFull("a queue replay is full of unconsumed unrolls; sample a batch before adding more")
        return [replay.writer.add_unroll(replay.storage, observations, actions, rewards, dones, behaviour_logits,
                                         features, feature_source) for replay in self.replays]

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
        return all(replay.ready(minimum, n_step) for replay, minimum in zip(self.replays, minimums))

    def sample(self, batch_size: int, n_step: int = 1, gamma: float = 1.0,
               features: FeatureSource | None = None, step: int = 0) -> Batch:
        """A batch made of each replay's share, concatenated in replay order (n_step, gamma: transitions;
        step: the job's environment step, which anneals elite and attentive λ)."""
        shares = self.shares if batch_size == self.batch_size else batch_shares(self.replays, batch_size)
        batches = []
        for replay, share in zip(self.replays, shares):
            indices = replay.sampler.sample(replay.storage, share, n_step, features, step)
            batches.append(replay.storage.gather(indices, n_step, gamma))
        return self.replays[0].storage.concatenate(batches)

    # -- checkpoint contract -----------------------------------------------------------------

    def state_dict(self) -> dict:
        return {str(number): replay.state_dict() for number, replay in enumerate(self.replays)}

    def load_state_dict(self, state: dict) -> None:
        expected = [str(number) for number in range(len(self.replays))]
        if sorted(state) != sorted(expected):
            raise ValueError(f"replay state holds replays {sorted(state)}, this job has {expected}")
        for number, replay in enumerate(self.replays):
            part = state[str(number)]
            if (part.get("kind"), part.get("capacity")) != (replay.kind, replay.capacity):
                raise ValueError(f"replay {number}: saved as {part.get('kind')} with capacity "
                                 f"{part.get('capacity')}, this job has {replay.name}")
            replay.load_state_dict(part)
