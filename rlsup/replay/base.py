"""The contracts of replay parts (TorchRL's storage, sampler and writer): what each offers the mixer and checkpoints."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Protocol, Sequence

import numpy as np

# Loading copies this many bytes per np.copyto call, so a memory-mapped checkpoint streams
# through a bounded window rather than being faulted in all at once beside our buffers.
LOAD_CHUNK_BYTES = 64 * 1024 * 1024
# Default readiness of replays other than queues: this share of capacity, or this many batch shares.
READY_CAPACITY_FRACTION = 0.2
READY_SHARES = 10


class Stateful(Protocol):
    """The checkpoint contract of every part: a state tree of JSON values and arrays, and its restore."""

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...


class FeatureSource(Protocol):
    """The current network's view of stored items, which elite replay compares with what was stored."""

    def current_features(self, storage: ReplayStorage, indices: np.ndarray) -> np.ndarray:
        """[n, D] float32, comparable with storage.features[indices]."""

    def current_logits(self, storage: ReplayStorage, indices: np.ndarray) -> np.ndarray:
        """[n, ...] float32, comparable with storage.logits[indices] (kl_div only)."""


class ReplayStorage(ABC):
    """Where items live, numbered by a global index; what samplers draw through and gather reads."""

    item: ClassVar[str]  # what one item is: "transitions" or "unrolls"
    capacity: int

    @abstractmethod
    def stored_count(self) -> int:
        """Rows or items held now: what samplers draw from before rejecting invalid ones."""

    @abstractmethod
    def stored_indices(self, positions: np.ndarray) -> np.ndarray:
        """Global indices of stored items numbered 0..stored_count()-1."""

    @abstractmethod
    def is_valid(self, indices: np.ndarray, n_step: int = 1) -> np.ndarray:
        """Whether gather can build each index now."""

    @abstractmethod
    def valid_indices(self, n_step: int = 1) -> np.ndarray:
        """Every index gather can build now."""

    @abstractmethod
    def valid_count(self, n_step: int = 1) -> int:
        """How many indices gather can build now."""

    def valid_count_floor(self, n_step: int = 1) -> int:
        """A lower bound of valid_count that costs nothing (0 where none is known: the exact count decides)."""
        return 0

    @abstractmethod
    def gather(self, indices: np.ndarray, n_step: int = 1, gamma: float = 1.0) -> Any:
        """The batch of these indices; n_step and gamma shape transitions and are ignored by unrolls."""

    @staticmethod
    @abstractmethod
    def concatenate(batches: Sequence[Any]) -> Any:
        """One batch from batches of this storage's gather, in order."""

    @property
    @abstractmethod
    def nbytes(self) -> int: ...

    # -- what elite and attentive replay read (a storage that keeps no vectors has None / raises) --

    @property
    @abstractmethod
    def features(self) -> Any:
        """Stored feature vectors by global index, or None."""

    @property
    @abstractmethod
    def logits(self) -> Any:
        """Stored logits by global index, or None."""

    @abstractmethod
    def sample_counts(self, indices: np.ndarray) -> np.ndarray:
        """times_sampled of each index: 1 on insertion, one more per draw."""

    @abstractmethod
    def record_draws(self, indices: np.ndarray) -> None: ...

    @abstractmethod
    def state_features(self, indices: np.ndarray) -> np.ndarray:
        """[n, states, feature_size]: the feature vectors of each item's states."""

    @abstractmethod
    def state_logits(self, indices: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def newest_state_features(self) -> np.ndarray:
        """Where the agent is now: attentive replay's reference."""

    @abstractmethod
    def newest_state_logits(self) -> np.ndarray: ...

    # -- checkpoint contract -------------------------------------------------------------------

    @abstractmethod
    def state_dict(self) -> dict: ...

    @abstractmethod
    def load_state_dict(self, state: dict) -> None: ...


class Sampler(ABC):
    """Chooses which stored items a batch uses, and says when a replay is ready and whether it has room.

    `step` is the job's environment step (elite and attentive anneal λ with it).
    """

    @abstractmethod
    def sample(self, storage: ReplayStorage, count: int, n_step: int = 1,
               features: FeatureSource | None = None, step: int = 0) -> np.ndarray: ...

    def available(self, storage: ReplayStorage, n_step: int = 1) -> int:
        """Items a draw can use now."""
        return storage.valid_count(n_step)

    def ready(self, storage: ReplayStorage, minimum: int, n_step: int = 1) -> bool:
        """Whether at least `minimum` items can be drawn now."""
        # Asked before every gradient step: a replay long past its minimum is answered without reading it.
        return self.available_floor(storage, n_step) >= minimum or self.available(storage, n_step) >= minimum

    def available_floor(self, storage: ReplayStorage, n_step: int = 1) -> int:
        """A lower bound of available() that costs nothing; a sampler that counts otherwise says 0."""
        return storage.valid_count_floor(n_step)

    def default_minimum(self, capacity: int, share: int) -> int:
        """Items to wait for when min_size is 0: max(20% of capacity, 10 shares), at most the capacity."""
        return min(capacity, max(math.ceil(READY_CAPACITY_FRACTION * capacity), READY_SHARES * share))

    def free(self, storage: ReplayStorage) -> int | None:
        """Items the storage can take before overwriting ones not yet drawn; None: it never blocks a writer."""
        return None

    def drop_oldest(self, storage: ReplayStorage) -> None:
        """Give up the oldest item not yet drawn, so a full sampler has room again (no-op where none blocks)."""

    def metrics(self) -> dict[str, float]:
        """What the sampler reports in `train` records beside the storage's size (e.g. elite's λ)."""
        return {}

    @abstractmethod
    def state_dict(self) -> dict: ...

    @abstractmethod
    def load_state_dict(self, state: dict) -> None: ...


class Writer(ABC):
    """Puts items into a storage and chooses where they go (the next slot, or one elite insertion picks)."""

    @abstractmethod
    def add_step(self, storage: Any, env: int, frame: Any, action: int, reward: float, terminal: bool,
                 first: bool, features: Any = None, logits: Any = None) -> None:
        """One transition row (TransitionStorage)."""

    @abstractmethod
    def add_final(self, storage: Any, env: int, frame: Any) -> None:
        """The observation that ended an episode (TransitionStorage)."""

    @abstractmethod
    def add_unroll(self, storage: Any, observations: Any, actions: Any, rewards: Any, dones: Any,
                   behaviour_logits: Any, features: Any, feature_source: FeatureSource | None = None) -> int:
        """One unroll (UnrollStorage); returns the slot it went to."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Writers so far hold no state of their own."""


class IndexedRows:
    """A [rows, envs, ...] array read by global index (env * rows_per_env + row), as samplers number items."""

    def __init__(self, array: np.ndarray, rows_per_env: int) -> None:
        self.array = array
        self.rows_per_env = rows_per_env

    def __getitem__(self, indices: Any) -> np.ndarray:
        envs, rows = np.divmod(np.asarray(indices, np.int64), self.rows_per_env)
        return self.array[rows, envs]

    def __len__(self) -> int:
        return self.array.shape[0] * self.array.shape[1]

    @property
    def shape(self) -> tuple:
        return (len(self),) + self.array.shape[2:]


def copy_in_chunks(destination: np.ndarray, source: np.ndarray) -> None:
    """np.copyto along the first axis in pieces of about LOAD_CHUNK_BYTES: no full temporary."""
    row_bytes = max(1, destination[:1].nbytes)
    step = max(1, LOAD_CHUNK_BYTES // row_bytes)
    for start in range(0, len(destination), step):
        np.copyto(destination[start:start + step], source[start:start + step])
