"""DQN transition storage: a ring per env keeps each frame once; stacks are rebuilt on sampling."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from rlsup.replay.base import IndexedRows, ReplayStorage, copy_in_chunks
from rlsup.replay.frames import FrameRings

ROW_FIELDS = ("frames", "actions", "rewards", "terminals", "firsts", "finals")


@dataclass(frozen=True)
class TransitionBatch:
    """Sampled n-step transitions: the learner's target is returns + discounts · Q_target(next)."""

    observations: np.ndarray       # [B, S, *frame] when stack_size > 1 else [B, *frame]
    actions: np.ndarray            # int64 [B], or float32 [B, action size] for continuous actions
    returns: np.ndarray            # float32 [B] n-step discounted reward sums
    next_observations: np.ndarray  # same shape as observations
    discounts: np.ndarray          # float32 [B]: gamma**k, or 0 after a terminal
    indices: np.ndarray            # int64 [B]: env * rows_per_env + ring row


class TransitionStorage(FrameRings, ReplayStorage):
    """Per-env ring buffers of rows (newest frame, action, reward, terminal, first, final)."""

    item = "transitions"

    def __init__(self, capacity: int, num_envs: int, frame_shape: tuple, frame_dtype: Any,
                 stack_size: int, feature_size: int | None = None, num_actions: int | None = None,
                 action_size: int = 0) -> None:
        if capacity < 1 or num_envs < 1 or stack_size < 1:
            raise ValueError(f"capacity ({capacity}), num_envs ({num_envs}) and stack_size ({stack_size}) "
                             "must all be at least 1")
        self.capacity = int(capacity)
        self.num_envs = int(num_envs)
        self.rows_per_env = math.ceil(capacity / num_envs)
        self.frame_shape = tuple(int(length) for length in frame_shape)
        self.frame_dtype = np.dtype(frame_dtype)
        self.stack_size = int(stack_size)
        rows = (self.rows_per_env, self.num_envs)
        # Laid out ring row first, env second: the filled part of every array is then one
        # contiguous prefix, which a checkpoint writes straight to disk without a copy.
        # np.zeros maps untouched pages lazily, so a large empty buffer costs no memory yet.
        self.frames = np.zeros(rows + self.frame_shape, self.frame_dtype)
        # action_size 0: one discrete action a row; above 0: a continuous action vector of that length.
        self.action_size = int(action_size)
        self.actions = (np.zeros(rows + (self.action_size,), np.float32) if self.action_size
                        else np.zeros(rows, np.int32))
        self.rewards = np.zeros(rows, np.float32)
        self.terminals = np.zeros(rows, np.bool_)
        self.firsts = np.zeros(rows, np.bool_)
        self.finals = np.zeros(rows, np.bool_)
        self.feature_size = None if feature_size is None else int(feature_size)
        self.num_actions = None if num_actions is None else int(num_actions)
        self.fields = ROW_FIELDS + self.allocate_scoring(rows)
        self.flat = {name: getattr(self, name).reshape((-1,) + getattr(self, name).shape[2:])
                     for name in self.fields}
        # Global index of the newest step row: attentive replay's "current state" (-1: none yet).
        self.last_step_index = -1
        # Plain ints: add_step runs once per env step and numpy scalars are slow there.
        self.cursors = [0] * self.num_envs     # ring row written next
        self.sizes = [0] * self.num_envs       # rows written and not yet overwritten
        self.step_rows = [0] * self.num_envs   # of those, the rows that are not final
        self.writes = 0
        self.last_layout = None

    def allocate_scoring(self, rows: tuple) -> tuple:
        """Per-row feature vectors (of obs_t), logits and draw counts, for elite and attentive replay."""
        fields = []
        if self.feature_size is not None:
            self.row_features = np.zeros(rows + (self.feature_size,), np.float32)
            fields.append("row_features")
        if self.num_actions is not None:
            self.row_logits = np.zeros(rows + (self.num_actions,), np.float32)
            fields.append("row_logits")
        if fields:
            self.row_times_sampled = np.zeros(rows, np.int64)
            fields.append("row_times_sampled")
        return tuple(fields)

    @property
    def scored(self) -> bool:
        return "row_times_sampled" in self.fields

    @property
    def features(self) -> IndexedRows | None:
        """Stored feature vectors [N, feature_size] by global index, or None if this storage keeps none."""
        return IndexedRows(self.row_features, self.rows_per_env) if self.feature_size is not None else None

    @property
    def logits(self) -> IndexedRows | None:
        """Stored logits [N, num_actions] by global index, or None if this storage keeps none."""
        return IndexedRows(self.row_logits, self.rows_per_env) if self.num_actions is not None else None

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in self.fields)

    # -- writing -----------------------------------------------------------------------------

    def add_step(self, env: int, frame: Any, action: int, reward: float, terminal: bool,
                 first: bool, features: Any = None, logits: Any = None) -> None:
        """Store obs_t's newest frame with the action taken, its reward and whether it cut bootstrapping.

        A storage made with feature_size (num_actions) also takes obs_t's feature vector (logits).
        """
        after_final = self.last_row_is_final(env)
        if after_final and not first:
            raise ValueError(f"env {env}: the step after add_final starts a new episode and needs first=True")
        if first and self.sizes[env] and not after_final:
            # Without the final row the previous step would take this reset as its next observation.
            raise ValueError(f"env {env}: first=True but the previous episode was not closed with add_final")
        self.check_scoring(features, logits)
        self.last_step_index = env * self.rows_per_env + self.cursors[env]
        self.write_row(env, frame, action, reward, terminal, first, final=False, features=features,
                       logits=logits)

    def check_scoring(self, features: Any, logits: Any) -> None:
        for name, given, size in (("features", features, self.feature_size), ("logits", logits, self.num_actions)):
            if (given is None) != (size is None):
                wanted = f"takes {name} of size {size}" if size is not None else f"keeps no {name}"
                raise ValueError(f"this storage {wanted}; add_step got {name}={'None' if given is None else '...'}")
            if given is not None and np.shape(given) != (size,):
                raise ValueError(f"{name} of shape {np.shape(given)} do not fit this storage's ({size},)")

    def add_final(self, env: int, frame: Any) -> None:
        """Store the observation that ended an episode (terminated or truncated): a next observation only."""
        if self.last_row_is_final(env):
            raise ValueError(f"env {env}: add_final called twice without a step in between")
        self.write_row(env, frame, 0, 0.0, False, False, final=True)

    def last_row_is_final(self, env: int) -> bool:
        self.check_env(env)
        if not self.sizes[env]:
            return False
        return bool(self.finals[self.cursors[env] - 1, env])  # row -1 wraps to the ring's end

    def write_row(self, env: int, frame: Any, action: int, reward: float, terminal: bool, first: bool,
                  final: bool, features: Any = None, logits: Any = None) -> None:
        frame = np.asarray(frame)
        fits = frame.dtype == self.frame_dtype or np.can_cast(frame.dtype, self.frame_dtype, "same_kind")
        if frame.shape != self.frame_shape or not fits:
            raise ValueError(f"frame of shape {frame.shape} and dtype {frame.dtype} does not fit storage "
                             f"frames of shape {self.frame_shape} and dtype {self.frame_dtype}")
        row = self.cursors[env]
        self.writes += 1
        if self.sizes[env] == self.rows_per_env:
            self.step_rows[env] -= not self.finals[row, env]
        else:
            self.sizes[env] += 1
        self.frames[row, env] = frame
        self.actions[row, env] = action
        self.rewards[row, env] = reward
        self.terminals[row, env] = terminal
        self.firsts[row, env] = first
        self.finals[row, env] = final
        if self.scored:
            self.write_scoring(row, env, features, logits)
        self.step_rows[env] += not final
        self.cursors[env] = (row + 1) % self.rows_per_env

    def write_scoring(self, row: int, env: int, features: Any, logits: Any) -> None:
        # A final row is never a transition's start, so its vectors stay zero and are never compared.
        if self.feature_size is not None:
            self.row_features[row, env] = 0.0 if features is None else features
        if self.num_actions is not None:
            self.row_logits[row, env] = 0.0 if logits is None else logits
        self.row_times_sampled[row, env] = 1

    def check_env(self, env: int) -> None:
        if not 0 <= env < self.num_envs:
            raise IndexError(f"env {env} out of range for a storage of {self.num_envs} envs")

    # -- reading -----------------------------------------------------------------------------

    def gather(self, indices: np.ndarray, n_step: int, gamma: float) -> TransitionBatch:
        """Build the n-step transitions starting at these indices; raises on any invalid index."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        plan = self.plan(indices, n_step, gamma)
        if not plan.valid.all():
            raise ValueError(f"cannot gather invalid indices {indices[~plan.valid][:10].tolist()} "
                             f"(n_step={n_step}); draw them with a sampler")
        both_envs = np.concatenate([plan.envs, plan.envs])
        # One take for observations and next observations together: copying frames is most of the cost.
        frames = self.flat["frames"][self.positions(both_envs[:, None], plan.stacks, plan.ring)]
        if self.stack_size == 1:
            frames = frames[:, 0]
        count = len(indices)
        return TransitionBatch(
            observations=frames[:count],
            actions=self.flat["actions"][plan.starts].astype(np.float32 if self.action_size else np.int64, copy=False),
            returns=plan.returns.astype(np.float32),
            next_observations=frames[count:],
            discounts=plan.discounts.astype(np.float32),
            indices=indices,
        )

    @staticmethod
    def concatenate(batches: Sequence[TransitionBatch]) -> TransitionBatch:
        """One batch from several, in order: the mixer's shares."""
        if len(batches) == 1:
            return batches[0]
        return TransitionBatch(**{name: np.concatenate([getattr(batch, name) for batch in batches])
                                  for name in TransitionBatch.__dataclass_fields__})

    # -- what elite and attentive replay read ------------------------------------------------

    def observations_at(self, indices: np.ndarray) -> np.ndarray:
        """obs_t of each transition, stacked as gather builds it: what a network's current features are of."""
        indices = np.asarray(indices, np.int64).reshape(-1)
        ring = self.ring()
        envs, offsets, _ = self.locate(indices, ring)
        frames = self.flat["frames"][self.positions(envs[:, None], self.stack_offsets(envs, offsets, ring), ring)]
        return frames[:, 0] if self.stack_size == 1 else frames

    def sample_counts(self, indices: np.ndarray) -> np.ndarray:
        """times_sampled of each index: 1 on insertion, one more per draw."""
        return IndexedRows(self.require_scored().row_times_sampled, self.rows_per_env)[indices]

    def record_draws(self, indices: np.ndarray) -> None:
        envs, rows = np.divmod(np.asarray(indices, np.int64), self.rows_per_env)
        np.add.at(self.require_scored().row_times_sampled, (rows, envs), 1)

    def state_features(self, indices: np.ndarray) -> np.ndarray:
        """[n, 1, feature_size]: a transition has one state whose features are stored (obs_t's)."""
        return self.require("features")[indices][:, None]

    def state_logits(self, indices: np.ndarray) -> np.ndarray:
        return self.require("logits")[indices][:, None]

    def newest_state_features(self) -> np.ndarray:
        """[feature_size] of the newest step row: where the agent is now, for attentive replay."""
        return self.require("features")[self.newest_index()[None]][0]

    def newest_state_logits(self) -> np.ndarray:
        return self.require("logits")[self.newest_index()[None]][0]

    def newest_index(self) -> np.ndarray:
        if self.last_step_index < 0:
            raise ValueError("cannot sample from an empty replay: no transitions stored yet")
        return np.int64(self.last_step_index)

    def require_scored(self) -> TransitionStorage:
        if not self.scored:
            raise ValueError("this transition storage keeps no feature vectors or logits: make it with "
                             "feature_size (or num_actions) for elite and attentive replay")
        return self

    def require(self, name: str) -> IndexedRows:
        rows = getattr(self, name)
        if rows is None:
            option = "feature_size" if name == "features" else "num_actions"
            raise ValueError(f"this transition storage keeps no {name}: make it with {option}")
        return rows

    # -- checkpoint contract -----------------------------------------------------------------

    def state_dict(self) -> dict:
        """Views of the filled prefix of every array (no copies) plus cursors and sizes."""
        filled = max(self.sizes)
        state: dict = {name: getattr(self, name)[:filled] for name in self.fields}
        state.update(num_envs=self.num_envs, rows_per_env=self.rows_per_env,
                     frame_shape=list(self.frame_shape), frame_dtype=self.frame_dtype.name,
                     cursors=list(self.cursors), sizes=list(self.sizes))
        if self.scored:
            state.update(feature_size=self.feature_size, num_actions=self.num_actions,
                         last_step_index=self.last_step_index)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Copy a saved state into this storage's own buffers (arrays may be read-only memory maps)."""
        self.check_layout(state)
        sizes = [int(size) for size in state["sizes"]]
        cursors = [int(cursor) for cursor in state["cursors"]]
        filled = max(sizes)
        for name in self.fields:
            expected = (filled,) + getattr(self, name).shape[1:]
            self.check_array(name, state[name], expected, getattr(self, name).dtype)
        # Rows this storage held past the loaded ones would leak into its next checkpoint.
        for name in self.fields:
            getattr(self, name)[filled:max(self.sizes)] = 0
            copy_in_chunks(getattr(self, name)[:filled], state[name])
        self.sizes, self.cursors = sizes, cursors
        self.writes += 1
        self.step_rows = [int(np.count_nonzero(~self.finals[:size, env])) for env, size in enumerate(sizes)]
        self.last_step_index = int(state["last_step_index"]) if self.scored else -1

    def check_layout(self, state: dict) -> None:
        scoring = ("feature_size", "num_actions", "last_step_index") if self.scored else ()
        missing = [key for key in self.fields + ("num_envs", "rows_per_env", "frame_shape", "frame_dtype",
                                                 "cursors", "sizes") + scoring if key not in state]
        if missing:
            raise ValueError(f"replay storage state lacks {missing}")
        saved = (state["num_envs"], state["rows_per_env"], list(state["frame_shape"]), state["frame_dtype"],
                 state.get("feature_size"), state.get("num_actions"))
        ours = (self.num_envs, self.rows_per_env, list(self.frame_shape), self.frame_dtype.name,
                self.feature_size, self.num_actions)
        if saved != ours:
            raise ValueError(f"replay storage state has (num_envs, rows_per_env, frame_shape, frame_dtype, "
                             f"feature_size, num_actions) = {saved}, this storage has {ours}")
        sizes, cursors = list(state["sizes"]), list(state["cursors"])
        if len(sizes) != self.num_envs or len(cursors) != self.num_envs:
            raise ValueError(f"replay storage state has {len(sizes)} sizes and {len(cursors)} cursors "
                             f"for {self.num_envs} envs")
        for env, (size, cursor) in enumerate(zip(sizes, cursors)):
            # A ring that has not wrapped yet was filled from row 0, so its cursor is its size.
            if not (0 <= size <= self.rows_per_env and 0 <= cursor < self.rows_per_env
                    and (size == self.rows_per_env or cursor == size)):
                raise ValueError(f"replay storage state: env {env} has size {size} and cursor {cursor}, "
                                 f"impossible for rings of {self.rows_per_env} rows")

    @staticmethod
    def check_array(name: str, array: Any, shape: tuple, dtype: np.dtype) -> None:
        if not isinstance(array, np.ndarray):
            raise ValueError(f"replay storage state: {name} is a {type(array).__name__}, not an array")
        if array.shape != shape or array.dtype != dtype:
            raise ValueError(f"replay storage state: {name} has shape {array.shape} and dtype {array.dtype}, "
                             f"expected {shape} and {dtype}")
