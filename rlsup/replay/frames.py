"""Frames kept once: per-env rings of rows, from which transitions' n-step windows and frame stacks are rebuilt."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ring:
    """Where each env's ring starts and how full it is, as arrays for vectorised lookups."""

    sizes: np.ndarray   # int64 [E] rows written and not yet overwritten
    oldest: np.ndarray  # int64 [E] ring row holding the oldest of them


@dataclass(frozen=True)
class Window:
    """The rows of each transition's n-step window: which belong to it, how many, whether a terminal cuts it."""

    rows: np.ndarray      # int64 [B, n] flat positions
    included: np.ndarray  # bool [B, n]
    lengths: np.ndarray   # k: rows from the start row to the row the next observation comes from
    cut: np.ndarray       # bool [B]: a terminal inside the window, so no bootstrap

    def returns(self, gamma: float, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """float64 n-step reward sums and bootstrap multipliers at this gamma."""
        powers = float(gamma) ** np.arange(self.rows.shape[1])
        returns = (self.included * powers * rewards[self.rows]).sum(axis=1)
        return returns, np.where(self.cut, 0.0, float(gamma) ** self.lengths)


@dataclass(frozen=True)
class Layout:
    """Where a set of indices' rows are and which are transitions: a plan before its gamma."""

    envs: np.ndarray
    offsets: np.ndarray
    starts: np.ndarray
    window: Window
    stacks: np.ndarray
    valid: np.ndarray
    ring: Ring


@dataclass(frozen=True)
class TransitionPlan:
    """Everything gather needs about a set of indices, before any frame is copied."""

    envs: np.ndarray
    offsets: np.ndarray      # age of each start row: 0 is the oldest row of its ring
    starts: np.ndarray       # flat positions of the start rows
    lengths: np.ndarray      # k: rows from the start row to the row the next observation comes from
    returns: np.ndarray      # float64 n-step reward sums
    discounts: np.ndarray    # float64 bootstrap multipliers
    stacks: np.ndarray       # int64 [2B, S] ages of the frames of observations, then of next observations
    valid: np.ndarray        # bool [B]
    ring: Ring


class FrameRings:
    """Locating and planning over per-env rings of rows, for TransitionStorage, which holds the rings.

    Each frame is stored once, in the row of the step that observed it; a transition's observation
    stack and n-step window are planned from row ages here, and copied only when gathered.
    """

    rows_per_env: int
    num_envs: int
    stack_size: int
    flat: dict[str, np.ndarray]
    finals: np.ndarray
    cursors: list[int]
    sizes: list[int]
    step_rows: list[int]
    writes: int                # rows written or loaded so far: a cached layout is of this many
    last_layout: tuple | None  # ((indices, n_step, writes), Layout) of the latest check

    # -- locating rows -----------------------------------------------------------------------

    def ring(self) -> Ring:
        sizes = np.asarray(self.sizes, np.int64)
        return Ring(sizes, (np.asarray(self.cursors, np.int64) - sizes) % self.rows_per_env)

    def positions(self, envs: np.ndarray, offsets: np.ndarray, ring: Ring) -> np.ndarray:
        """Flat positions in the [rows * envs] arrays of rows given by env and age."""
        return ((ring.oldest[envs] + offsets) % self.rows_per_env) * self.num_envs + envs

    def stored_count(self) -> int:
        """Rows held now, final rows included: what samplers draw from before rejecting."""
        return sum(self.sizes)

    def stored_indices(self, positions: np.ndarray) -> np.ndarray:
        """Global indices of stored rows numbered 0..stored_count()-1, env by env, oldest first."""
        ring = self.ring()
        ends = np.cumsum(ring.sizes)
        envs = np.searchsorted(ends, positions, side="right")
        offsets = positions - (ends[envs] - ring.sizes[envs])
        return envs * self.rows_per_env + (ring.oldest[envs] + offsets) % self.rows_per_env

    def locate(self, indices: np.ndarray, ring: Ring) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Env, age and whether the row is stored, for each global index (out-of-range ones are not)."""
        in_range = (indices >= 0) & (indices < self.rows_per_env * self.num_envs)
        envs, rows = np.divmod(np.where(in_range, indices, 0), self.rows_per_env)
        offsets = (rows - ring.oldest[envs]) % self.rows_per_env
        return envs, offsets, in_range & (offsets < ring.sizes[envs])

    # -- planning transitions ----------------------------------------------------------------

    def plan(self, indices: np.ndarray, n_step: int, gamma: float) -> TransitionPlan:
        layout = self.layout(indices, n_step)
        returns, discounts = layout.window.returns(gamma, self.flat["rewards"])
        return TransitionPlan(layout.envs, layout.offsets, layout.starts, layout.window.lengths, returns,
                              discounts, layout.stacks, layout.valid, layout.ring)

    def layout(self, indices: np.ndarray, n_step: int) -> Layout:
        """Where each index's rows are and whether it is a transition: the part of a plan no gamma changes.

        A sampler checks its draws and gather builds the same ones right after, so the layout of the
        last check is kept until the next write.
        """
        if n_step < 1:
            raise ValueError(f"n_step must be at least 1, not {n_step}")
        key = (indices.tobytes(), n_step, self.writes)
        if self.last_layout is not None and self.last_layout[0] == key:
            return self.last_layout[1]
        ring = self.ring()
        envs, offsets, stored = self.locate(indices, ring)
        starts = self.positions(envs, offsets, ring)
        window = self.windows(envs, offsets, ring, n_step)
        both_envs = np.concatenate([envs, envs])
        stacks = self.stack_offsets(both_envs, np.concatenate([offsets, offsets + window.lengths]), ring)
        complete = stacks[:, 0] >= 0  # the stack's oldest frame is still stored
        count = len(indices)
        valid = (stored & ~self.flat["finals"][starts] & (offsets + window.lengths < ring.sizes[envs])
                 & complete[:count] & complete[count:])
        layout = Layout(envs, offsets, starts, window, stacks, valid, ring)
        self.last_layout = (key, layout)
        return layout

    def windows(self, envs: np.ndarray, offsets: np.ndarray, ring: Ring, n_step: int) -> Window:
        """The rows of each start row's n-step window, which of them belong to it, and its length k."""
        # Rows past the newest are read as the newest: such windows come out invalid anyway.
        ages = np.minimum(offsets[:, None] + np.arange(n_step), (ring.sizes[envs] - 1)[:, None])
        rows = self.positions(envs[:, None], ages, ring)
        terminals = self.flat["terminals"][rows]
        # A final row ends the episode without a terminal: bootstrap from it. (A final start row
        # is not a transition at all; plan rejects it.)
        finals = self.flat["finals"][rows]
        # Step i belongs to the window unless a final row came at or before it or a terminal before it;
        # so k, the row the next observation comes from, is the number of steps that belong.
        closed = np.logical_or.accumulate(finals, axis=1)
        closed[:, 1:] |= np.logical_or.accumulate(terminals[:, :-1], axis=1)
        included = ~closed
        return Window(rows, included, np.count_nonzero(included, axis=1), (included & terminals).any(axis=1))

    def stack_offsets(self, envs: np.ndarray, offsets: np.ndarray, ring: Ring) -> np.ndarray:
        """[N, S] ages of each stack's frames, oldest first, repeating the episode's first frame as padding.

        A negative age means the stack reaches rows already overwritten (or never stored).
        """
        ages = offsets[:, None] + np.arange(1 - self.stack_size, 1)
        if self.stack_size == 1:
            return ages
        # Only `first` pads (a life-loss terminal keeps the game and its frames going): the stack
        # begins at the latest episode start inside it. Negative ages read other rows' flags, but a
        # stack reaching them starts below zero whatever they say, and is invalid.
        firsts = self.flat["firsts"][self.positions(envs[:, None], ages, ring)]
        latest_first = np.where(firsts, ages, np.iinfo(np.int64).min).max(axis=1)
        return np.maximum(ages, latest_first[:, None])

    # -- which indices are transitions ---------------------------------------------------------

    def is_valid(self, indices: np.ndarray, n_step: int) -> np.ndarray:
        """Whether each global index is a transition gather can build now."""
        return self.layout(np.asarray(indices, np.int64).reshape(-1), n_step).valid

    def valid_indices(self, n_step: int = 1) -> np.ndarray:
        """Every index that can be sampled now (reads the whole storage: for fallbacks and tests)."""
        indices = self.stored_indices(np.arange(self.stored_count()))
        return indices[self.is_valid(indices, n_step)]

    def valid_count_floor(self, n_step: int = 1) -> int:
        """A lower bound of valid_count that reads no rows: what a ready check needs once rings are long."""
        # Only the rows valid_count checks can be step rows that are not transitions.
        return sum(self.step_rows) - self.num_envs * (self.stack_size - 1 + n_step)

    def valid_count(self, n_step: int = 1) -> int:
        """Transitions that can be sampled now, counted without reading the whole storage."""
        # Step rows at least stack_size - 1 rows from the oldest and n_step from the newest are
        # always valid, so only the rows near either end of each ring need checking.
        ring = self.ring()
        sizes = ring.sizes[:, None]
        near_oldest = np.broadcast_to(np.arange(self.stack_size - 1), (self.num_envs, self.stack_size - 1))
        near_newest = sizes - n_step + np.arange(n_step)
        ages = np.concatenate([near_oldest, near_newest], axis=1)
        # In short rings the two groups overlap: such rows are counted in the first group only.
        keep = np.concatenate([near_oldest < sizes, near_newest >= self.stack_size - 1], axis=1)
        envs = np.broadcast_to(np.arange(self.num_envs)[:, None], ages.shape)[keep]
        rows = (ring.oldest[envs] + ages[keep]) % self.rows_per_env
        steps = ~self.finals[rows, envs]
        valid = self.is_valid(envs * self.rows_per_env + rows, n_step)
        return sum(self.step_rows) - int(np.count_nonzero(steps & ~valid))
