"""Elite and attentive replay scoring: distances, lambda annealing, and the four selection strategies."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

DISTANCES = ("ln_norm", "cos_dist", "kl_div")
STRATEGIES = (1, 2, 3, 4)
# Below this a vector counts as zero for the cosine, whose similarity is then taken as 0 (distance 1).
COSINE_FLOOR = 1e-12


# -- lambda annealing ---------------------------------------------------------------------------


def annealed_lambda(initial: float, alpha: float, anneal_steps: int, step: int) -> float:
    """λ at environment step `step`: λ₀ falling linearly to 1 at step anneal_steps·α, then 1.

    Environment steps, like every schedule of a job (total_steps, lr_end_step), so a user can set the
    horizon against the budget. The reference implementation counts learner updates, which for
    V-trace is steps / (unroll_length × batch_size) and made its Breakout horizon 6 times the budget.
    A pure function of the step: no rounding drift, and a resume continues it exactly.
    """
    horizon = anneal_steps * alpha
    if step >= horizon or initial <= 1.0:
        return 1.0
    return max(1.0, initial - (initial - 1.0) * (step / horizon))


def candidate_count(lambda_value: float, count: int) -> int:
    """Size of the uniform candidate bucket for a draw of `count` items: int(λ·n), at least n."""
    return max(count, int(lambda_value * count))


# -- distances ----------------------------------------------------------------------------------


def ln_norm_distances(current: np.ndarray, stored: np.ndarray, p: float) -> np.ndarray:
    """[n] p-norm of each item's whole difference, current − stored, flattened."""
    difference = floating(as_items(current) - as_items(stored))
    # The common norms without a general power, which costs more than everything else here together.
    if p == 2.0:
        return np.sqrt(np.einsum("ij,ij->i", difference, difference))
    if p == 1.0:
        return np.abs(difference).sum(axis=1)
    return (np.abs(difference) ** p).sum(axis=1) ** (1.0 / p)


def cosine_distances(current: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """[n] 1 − cosine similarity of each item's flattened vectors (a zero vector has similarity 0)."""
    current, stored = floating(as_items(current)), floating(as_items(stored))
    norms = np.sqrt(np.einsum("ij,ij->i", current, current) * np.einsum("ij,ij->i", stored, stored))
    dots = np.einsum("ij,ij->i", current, stored)
    similarity = np.where(norms > COSINE_FLOOR, dots / np.maximum(norms, COSINE_FLOOR), 0.0)
    return 1.0 - similarity


def floating(array: np.ndarray) -> np.ndarray:
    """Float32 vectors stay float32: ranking needs no more, and float64 would double the memory traffic."""
    return array if array.dtype in (np.float32, np.float64) else array.astype(np.float32)


def kl_divergences(current_logits: np.ndarray, stored_logits: np.ndarray) -> np.ndarray:
    """[n] KL(softmax(current) ‖ softmax(stored)) over the last axis, averaged over any state axes."""
    current_log = log_softmax(np.asarray(current_logits, np.float64))
    stored_log = log_softmax(np.asarray(stored_logits, np.float64))
    per_state = (np.exp(current_log) * (current_log - stored_log)).sum(axis=-1)
    return per_state.reshape(len(per_state), -1).mean(axis=1)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def as_items(array: np.ndarray) -> np.ndarray:
    array = np.asarray(array)
    return array.reshape(len(array), -1)


def item_distances(distance: str, current: np.ndarray, stored: np.ndarray, p: float) -> np.ndarray:
    """[n] elite off-policiness: current vs stored feature vectors (or logits for kl_div), per item."""
    if distance == "ln_norm":
        return ln_norm_distances(current, stored, p)
    if distance == "cos_dist":
        return cosine_distances(current, stored)
    if distance == "kl_div":
        return kl_divergences(current, stored)
    raise ValueError(f"unknown distance {distance!r}; known: {list(DISTANCES)}")


def reference_distances(distance: str, reference: np.ndarray, candidates: np.ndarray, p: float) -> np.ndarray:
    """[n] attentive distance: reference [D] against each of a candidate's states [n, S, D], mean over S."""
    candidates = np.asarray(candidates)
    count, states = candidates.shape[0], candidates.shape[1]
    flat = candidates.reshape(count * states, -1)
    # KL(current ‖ stored): the reference is where the agent is now, the candidates are what was stored.
    repeated = np.broadcast_to(np.asarray(reference).reshape(1, -1), flat.shape)
    return item_distances(distance, repeated, flat, p).reshape(count, states).mean(axis=1)


# -- ranking and selection ----------------------------------------------------------------------


class Ranking(NamedTuple):
    """The bucket's distinct indices in L order (by distance, stable), with what the strategies need."""

    indices: np.ndarray        # int64 [m] distinct candidates, nearest first
    multiplicity: np.ndarray   # int64 [m] how often each was drawn into the bucket
    distances: np.ndarray      # float64 [m]
    times_sampled: np.ndarray  # int64 [m]


class Selection(NamedTuple):
    """A strategy's choice: `count` indices, of which the last `filled` came from the uniform fill."""

    indices: np.ndarray  # int64 [count]
    filled: int


def distinct_candidates(bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct indices of the bucket in order of first appearance, and how often each appears."""
    unique, first_positions, counts = np.unique(bucket, return_index=True, return_counts=True)
    order = np.argsort(first_positions, kind="stable")
    return unique[order].astype(np.int64), counts[order].astype(np.int64)


def rank(distinct: np.ndarray, multiplicity: np.ndarray, distances: np.ndarray,
         times_sampled: np.ndarray) -> Ranking:
    """L: the distinct candidates sorted by distance ascending, ties kept in first-appearance order."""
    order = np.argsort(np.asarray(distances, np.float64), kind="stable")
    return Ranking(np.asarray(distinct, np.int64)[order], np.asarray(multiplicity, np.int64)[order],
                   np.asarray(distances, np.float64)[order], np.asarray(times_sampled, np.int64)[order])


def stride(ranking: Ranking, count: int) -> int:
    """s = max(1, len(L) // n): the rank step of strategy 2 and the window width of strategy 4."""
    return max(1, len(ranking.indices) // count)


def nearest_first(ranking: Ranking, count: int) -> np.ndarray:
    """Strategy 1: L in order, each index repeated as often as it was drawn, up to n."""
    return np.repeat(ranking.indices, ranking.multiplicity)[:count]


def rank_stratified(ranking: Ranking, count: int) -> np.ndarray:
    """Strategy 2: every s-th index of L, up to n."""
    return ranking.indices[::stride(ranking, count)][:count]


def least_sampled_first(ranking: Ranking, count: int) -> np.ndarray:
    """Strategy 3: times_sampled == 1 in L order, then == 2, …: a stable sort by times_sampled, up to n."""
    return ranking.indices[np.argsort(ranking.times_sampled, kind="stable")][:count]


def least_sampled_per_window(ranking: Ranking, count: int) -> np.ndarray:
    """Strategy 4: L cut into windows of s; the least-sampled of each (first on ties), up to n windows."""
    width = stride(ranking, count)
    starts = np.arange(0, len(ranking.indices), width)[:count]
    picks = [start + int(np.argmin(ranking.times_sampled[start:start + width])) for start in starts]
    return ranking.indices[np.asarray(picks, np.int64)]


STRATEGY_FUNCTIONS = {1: nearest_first, 2: rank_stratified, 3: least_sampled_first, 4: least_sampled_per_window}


def select(strategy: int, ranking: Ranking, count: int, bucket: np.ndarray) -> Selection:
    """The strategy's picks, topped up from the bucket's own (uniform) draws when it finds fewer than n.

    The top-up takes the bucket's first entries: they are uniform draws already, so no further
    random numbers are used and no loop waits for distinct candidates that may not exist.
    """
    if strategy not in STRATEGY_FUNCTIONS:
        raise ValueError(f"unknown elite strategy {strategy!r}; known: {list(STRATEGIES)}")
    picked = STRATEGY_FUNCTIONS[strategy](ranking, count)
    missing = count - len(picked)
    fill = np.asarray(bucket, np.int64)[:missing] if missing > 0 else np.empty(0, np.int64)
    return Selection(np.concatenate([picked.astype(np.int64), fill]), max(0, missing))


def farthest(candidates: np.ndarray, distances: np.ndarray) -> int:
    """Elite insertion: the candidate with the largest distance (the first of equals) is overwritten."""
    return int(np.asarray(candidates)[int(np.argmax(np.asarray(distances)))])
