"""V-trace unroll storage: a ring of whole unrolls with their behaviour logits (or log-probabilities) and features."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rlsup.replay.base import ReplayStorage, copy_in_chunks
from rlsup.spec.rules import KL_DIV_NEEDS_LOGITS

UNROLL_FIELDS = ("observations", "actions", "rewards", "dones", "behaviour_logits", "unroll_features",
                 "times_sampled")
# Continuous actions: a vector each, and the behaviour policy's log-probability of it in place of its logits.
CONTINUOUS_FIELDS = tuple("behaviour_log_probs" if name == "behaviour_logits" else name for name in UNROLL_FIELDS)


@dataclass(frozen=True)
class UnrollBatch:
    """B unrolls, time-major as the learner wants them."""

    observations: np.ndarray      # [T+1, B, *obs_shape]
    actions: np.ndarray           # [T, B] int64; continuous: [T, B, A] float32 Gaussian samples
    rewards: np.ndarray           # [T, B] float32 learning rewards (clipped if the env clips)
    dones: np.ndarray             # [T, B] bool: terminal after action t, the bootstrap cut
    behaviour_logits: np.ndarray | None  # [T, B, A] float32; None for continuous actions
    features: np.ndarray          # [T+1, B, F] float32 actor-computed feature-head outputs
    indices: np.ndarray           # [B] int64
    behaviour_log_probs: np.ndarray | None = None  # continuous actions: [T, B] float32 log μ(a_t | x_t)

    @property
    def continuous(self) -> bool:
        return self.behaviour_log_probs is not None


TIME_MAJOR = ("observations", "actions", "rewards", "dones", "behaviour_logits", "features", "behaviour_log_probs")


def concatenate_unroll_batches(batches: list[UnrollBatch]) -> UnrollBatch:
    """One batch from several, side by side along the batch axis (axis 1 of the time-major arrays)."""
    if len(batches) == 1:
        return batches[0]
    joined = {name: np.concatenate([getattr(batch, name) for batch in batches], axis=1)
              if getattr(batches[0], name) is not None else None for name in TIME_MAJOR}
    return UnrollBatch(**joined, indices=np.concatenate([batch.indices for batch in batches]))


class UnrollStorage(ReplayStorage):
    """`capacity` unrolls of `unroll_length` steps; item index = slot, the oldest overwritten first."""

    item = "unrolls"

    def __init__(self, capacity: int, unroll_length: int, observation_shape: tuple, observation_dtype: Any,
                 num_actions: int, feature_size: int, continuous: bool = False) -> None:
        if min(capacity, unroll_length, num_actions, feature_size) < 1:
            raise ValueError(f"capacity ({capacity}), unroll_length ({unroll_length}), num_actions "
                             f"({num_actions}) and feature_size ({feature_size}) must all be at least 1")
        self.capacity, self.unroll_length = int(capacity), int(unroll_length)
        self.observation_shape = tuple(int(length) for length in observation_shape)
        self.observation_dtype = np.dtype(observation_dtype)
        self.num_actions, self.feature_size = int(num_actions), int(feature_size)
        self.continuous = bool(continuous)
        self.fields = CONTINUOUS_FIELDS if self.continuous else UNROLL_FIELDS
        steps, states = (self.capacity, self.unroll_length), (self.capacity, self.unroll_length + 1)
        # np.zeros maps untouched pages lazily: an empty storage costs no memory yet.
        self.observations = np.zeros(states + self.observation_shape, self.observation_dtype)
        self.rewards = np.zeros(steps, np.float32)
        self.dones = np.zeros(steps, np.bool_)
        if self.continuous:
            self.actions = np.zeros(steps + (self.num_actions,), np.float32)
            self.behaviour_log_probs = np.zeros(steps, np.float32)
        else:
            self.actions = np.zeros(steps, np.int64)
            self.behaviour_logits = np.zeros(steps + (self.num_actions,), np.float32)
        self.unroll_features = np.zeros(states + (self.feature_size,), np.float32)
        self.times_sampled = np.zeros(self.capacity, np.int64)
        self.size = 0         # slots holding an unroll; they are always slots 0..size-1
        self.cursor = 0       # slot the next unroll overwrites, unless elite insertion picks another
        self.added = 0        # unrolls ever added: a queue's consumer counts against it
        self.last_index = -1  # slot of the newest unroll: attentive replay's "current state"

    # -- the views elite and attentive replay read --------------------------------------------

    @property
    def features(self) -> np.ndarray:
        """[capacity, (T+1)·F]: each unroll's feature vectors flattened into one item vector."""
        return self.unroll_features.reshape(self.capacity, -1)

    @property
    def logits(self) -> np.ndarray:
        """[capacity, T, A] behaviour logits, for kl_div."""
        return self._behaviour_logits()

    def _behaviour_logits(self) -> np.ndarray:
        if self.continuous:
            raise ValueError(KL_DIV_NEEDS_LOGITS)
        return self.behaviour_logits

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.fields)

    def __len__(self) -> int:
        return self.size

    # -- writing -----------------------------------------------------------------------------

    def add(self, observations: Any, actions: Any, rewards: Any, dones: Any, behaviour_logits: Any,
            features: Any, slot: int | None = None) -> int:
        """Store one unroll (arrays without a batch axis) in the next slot, or in `slot`; returns its index.

        A continuous storage takes the behaviour's log-probabilities [T] as behaviour_logits, the name the replay
        mixer and writers pass the behaviour policy's record under."""
        item = self.checked_item(observations, actions, rewards, dones, behaviour_logits, features)
        if slot is None:
            slot = self.cursor
            self.cursor = (self.cursor + 1) % self.capacity
        elif not 0 <= slot < self.size:
            raise IndexError(f"slot {slot} is not a stored unroll of this storage ({self.size} stored)")
        for name, array in item.items():
            getattr(self, name)[slot] = array
        self.times_sampled[slot] = 1
        self.size = max(self.size, slot + 1)
        self.added += 1
        self.last_index = slot
        return slot

    def checked_item(self, observations: Any, actions: Any, rewards: Any, dones: Any, behaviour_logits: Any,
                     features: Any) -> dict[str, np.ndarray]:
        length, states = self.unroll_length, self.unroll_length + 1
        behaviour = (("behaviour_log_probs", (length,)) if self.continuous
                     else ("behaviour_logits", (length, self.num_actions)))
        item = {"observations": (observations, (states,) + self.observation_shape),
                "actions": (actions, self.actions.shape[1:]), "rewards": (rewards, (length,)),
                "dones": (dones, (length,)), behaviour[0]: (behaviour_logits, behaviour[1]),
                "unroll_features": (features, (states, self.feature_size))}
        checked = {}
        for name, (array, shape) in item.items():
            array = np.asarray(array)
            if array.shape != shape:
                raise ValueError(f"unroll {name} has shape {array.shape}, this storage takes {shape}")
            checked[name] = array
        return checked

    # -- the interface samplers draw through (every stored unroll is a valid item) -------------

    def stored_count(self) -> int:
        return self.size

    def stored_indices(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, np.int64)

    def is_valid(self, indices: np.ndarray, n_step: int = 1) -> np.ndarray:
        indices = np.asarray(indices, np.int64).reshape(-1)
        return (indices >= 0) & (indices < self.size)

    def valid_indices(self, n_step: int = 1) -> np.ndarray:
        return np.arange(self.size, dtype=np.int64)

    def valid_count(self, n_step: int = 1) -> int:
        return self.size

    def sample_counts(self, indices: np.ndarray) -> np.ndarray:
        return self.times_sampled[np.asarray(indices, np.int64)]

    def record_draws(self, indices: np.ndarray) -> None:
        np.add.at(self.times_sampled, np.asarray(indices, np.int64), 1)

    def state_features(self, indices: np.ndarray) -> np.ndarray:
        """[n, T+1, F]: the feature vectors of each unroll's states."""
        return self.unroll_features[np.asarray(indices, np.int64)]

    def state_logits(self, indices: np.ndarray) -> np.ndarray:
        return self._behaviour_logits()[np.asarray(indices, np.int64)]

    def newest_state_features(self) -> np.ndarray:
        """[F] of the newest unroll's last state: where the agent is now."""
        return self.unroll_features[self.newest_index(), self.unroll_length]

    def newest_state_logits(self) -> np.ndarray:
        # The last state has no action, hence no logits: the latest that has them is step T−1.
        return self._behaviour_logits()[self.newest_index(), self.unroll_length - 1]

    def newest_index(self) -> int:
        if self.last_index < 0:
            raise ValueError("cannot sample from an empty replay: no unrolls stored yet")
        return self.last_index

    # -- reading -----------------------------------------------------------------------------

    def gather(self, indices: np.ndarray, n_step: int = 1, gamma: float = 1.0) -> UnrollBatch:
        """The unrolls at these indices, time-major; n_step and gamma are for the transition storage's API."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        if not self.is_valid(indices).all():
            raise ValueError(f"cannot gather indices {indices[~self.is_valid(indices)][:10].tolist()}: "
                             f"this storage holds {self.size} unrolls")

        def time_major(array: np.ndarray) -> np.ndarray:
            return np.ascontiguousarray(np.swapaxes(array[indices], 0, 1))

        behaviour = ({"behaviour_logits": None, "behaviour_log_probs": time_major(self.behaviour_log_probs)}
                     if self.continuous else {"behaviour_logits": time_major(self.behaviour_logits)})
        return UnrollBatch(observations=time_major(self.observations), actions=time_major(self.actions),
                           rewards=time_major(self.rewards), dones=time_major(self.dones),
                           features=time_major(self.unroll_features), indices=indices, **behaviour)

    @staticmethod
    def concatenate(batches: Sequence[UnrollBatch]) -> UnrollBatch:
        return concatenate_unroll_batches(list(batches))

    # -- checkpoint contract -----------------------------------------------------------------

    def state_dict(self) -> dict:
        """Views of the filled slots of every array (no copies) plus the counters."""
        state: dict = {name: getattr(self, name)[:self.size] for name in self.fields}
        state.update(layout=self.layout(), size=self.size, cursor=self.cursor, added=self.added,
                     last_index=self.last_index)
        return state

    def layout(self) -> dict:
        layout = {"capacity": self.capacity, "unroll_length": self.unroll_length,
                  "observation_shape": list(self.observation_shape), "observation_dtype": self.observation_dtype.name,
                  "num_actions": self.num_actions, "feature_size": self.feature_size}
        if self.continuous:  # only then: a discrete storage's layout stays what its checkpoints hold
            layout["continuous"] = True
        return layout

    def load_state_dict(self, state: dict) -> None:
        """Copy a saved state into this storage's own buffers (arrays may be read-only memory maps)."""
        # The layout first: a discrete run's state offered to a continuous storage differs there before its fields.
        if "layout" in state and dict(state["layout"]) != self.layout():
            raise ValueError(f"unroll storage state has layout {dict(state['layout'])}, this storage has "
                             f"{self.layout()}")
        missing = [key for key in self.fields + ("layout", "size", "cursor", "added", "last_index")
                   if key not in state]
        if missing:
            raise ValueError(f"unroll storage state lacks {missing}")
        size, cursor, added, last_index = (int(state[key]) for key in ("size", "cursor", "added", "last_index"))
        if not (0 <= size <= self.capacity and 0 <= cursor < self.capacity and -1 <= last_index < size
                and added >= size):
            raise ValueError(f"unroll storage state: size {size}, cursor {cursor}, added {added}, last index "
                             f"{last_index} are impossible for a capacity of {self.capacity}")
        for name in self.fields:
            array, ours = state[name], getattr(self, name)
            shape = (size,) + ours.shape[1:]
            if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != ours.dtype:
                raise ValueError(f"unroll storage state: {name} is not a {ours.dtype} array of shape {shape}")
        for name in self.fields:
            # Slots this storage held past the loaded ones would leak into its next checkpoint.
            getattr(self, name)[size:self.size] = 0
            copy_in_chunks(getattr(self, name)[:size], state[name])
        self.size, self.cursor, self.added, self.last_index = size, cursor, added, last_index
