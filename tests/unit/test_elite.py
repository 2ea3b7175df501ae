"""Elite scoring against the formulas of ALGORITHMS.md, and the elite and attentive samplers built on it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from rlsup.replay import elite
from rlsup.replay.mixer import ReplayMixer, make_replay
from rlsup.replay.samplers import AttentiveSampler, EliteSampler, UniformSampler, draw_uniform
from rlsup.replay.unrolls import UnrollStorage
from rlsup.spec import ReplaySection

T, FEATURES, ACTIONS = 3, 4, 3


# -- distances, written out from their definitions -------------------------------------------


def slow_ln_norm(current, stored, p):
    return sum(abs(c - s) ** p for c, s in zip(np.ravel(current), np.ravel(stored))) ** (1.0 / p)


def slow_cosine(current, stored):
    current, stored = list(np.ravel(current)), list(np.ravel(stored))
    dot = sum(c * s for c, s in zip(current, stored))
    norms = math.sqrt(sum(c * c for c in current)) * math.sqrt(sum(s * s for s in stored))
    return 1.0 - dot / norms


def slow_kl(current_logits, stored_logits):
    """KL(π_current ‖ π_stored) of one state's softmax policies."""
    def softmax(logits):
        exponentials = [math.exp(value) for value in logits]
        return [value / sum(exponentials) for value in exponentials]
    current, stored = softmax(current_logits), softmax(stored_logits)
    return sum(c * (math.log(c) - math.log(s)) for c, s in zip(current, stored))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_ln_norm_is_the_p_norm_of_the_whole_difference(p):
    generator = np.random.default_rng(0)
    current, stored = generator.normal(size=(5, T + 1, FEATURES)), generator.normal(size=(5, T + 1, FEATURES))
    expected = [slow_ln_norm(c, s, p) for c, s in zip(current, stored)]
    np.testing.assert_allclose(elite.item_distances("ln_norm", current, stored, p), expected, rtol=1e-12)


def test_cosine_distance_is_one_minus_the_cosine_similarity():
    generator = np.random.default_rng(1)
    current, stored = generator.normal(size=(6, 8)), generator.normal(size=(6, 8))
    expected = [slow_cosine(c, s) for c, s in zip(current, stored)]
    np.testing.assert_allclose(elite.item_distances("cos_dist", current, stored, 2.0), expected, rtol=1e-12)
    same, opposite = elite.cosine_distances(current, 3 * current), elite.cosine_distances(current, -current)
    np.testing.assert_allclose(same, 0.0, atol=1e-12)
    np.testing.assert_allclose(opposite, 2.0, atol=1e-12)


def test_cosine_distance_of_a_zero_vector_is_one_not_nan():
    distances = elite.cosine_distances(np.zeros((2, 3)), np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))
    np.testing.assert_array_equal(distances, [1.0, 1.0])


def test_kl_divergence_of_softmax_policies_is_averaged_over_an_unrolls_steps():
    generator = np.random.default_rng(2)
    current, stored = generator.normal(size=(4, T, ACTIONS)) * 3, generator.normal(size=(4, T, ACTIONS)) * 3
    expected = [np.mean([slow_kl(c_step, s_step) for c_step, s_step in zip(c, s)]) for c, s in zip(current, stored)]
    np.testing.assert_allclose(elite.item_distances("kl_div", current, stored, 2.0), expected, rtol=1e-10)
    # One state per item (DQN: Q-values as logits), and KL is not symmetric: current ‖ stored.
    single = elite.kl_divergences(current[:, 0], stored[:, 0])
    np.testing.assert_allclose(single, [slow_kl(c, s) for c, s in zip(current[:, 0], stored[:, 0])], rtol=1e-10)
    assert not np.allclose(single, elite.kl_divergences(stored[:, 0], current[:, 0]))
    np.testing.assert_allclose(elite.kl_divergences(current, current + 5.0), 0.0, atol=1e-12)  # shift-invariant


@pytest.mark.parametrize("distance", elite.DISTANCES)
def test_attentive_distance_is_the_mean_over_a_candidates_states(distance):
    generator = np.random.default_rng(3)
    reference, candidates = generator.normal(size=FEATURES), generator.normal(size=(5, T + 1, FEATURES))
    single = {"ln_norm": lambda c: slow_ln_norm(reference, c, 2.0), "cos_dist": lambda c: slow_cosine(reference, c),
              "kl_div": lambda c: slow_kl(reference, c)}[distance]
    expected = [np.mean([single(state) for state in candidate]) for candidate in candidates]
    np.testing.assert_allclose(elite.reference_distances(distance, reference, candidates, 2.0), expected, rtol=1e-10)


def test_unknown_distance_and_strategy_are_refused():
    with pytest.raises(ValueError, match="unknown distance 'l7'"):
        elite.item_distances("l7", np.zeros((1, 2)), np.zeros((1, 2)), 2.0)
    ranking = elite.rank(np.array([1]), np.array([1]), np.array([0.0]), np.array([1]))
    with pytest.raises(ValueError, match="unknown elite strategy 5"):
        elite.select(5, ranking, 1, np.array([1]))


# -- lambda annealing --------------------------------------------------------------------------


def test_lambda_falls_linearly_in_env_steps_and_is_exactly_one_from_anneal_steps_times_alpha():
    initial, alpha, anneal_steps = 6.0, 2.0, 5
    decrement = (initial - 1) / (anneal_steps * alpha)
    values = [elite.annealed_lambda(initial, alpha, anneal_steps, step) for step in range(14)]
    np.testing.assert_allclose(values[:10], [initial - step * decrement for step in range(10)], rtol=1e-12)
    assert values[9] > 1.0
    assert values[10:] == [1.0, 1.0, 1.0, 1.0]
    # A horizon that is not a whole number of steps: never below 1, 1 from the first step past it.
    fractional = [elite.annealed_lambda(3.0, 0.5, 3, step) for step in range(4)]
    assert fractional[:2] == [3.0, 3.0 - 2.0 / 1.5] and fractional[2:] == [1.0, 1.0]


def test_candidate_bucket_holds_int_lambda_times_n():
    assert elite.candidate_count(5.5, 3) == 16
    assert elite.candidate_count(6.0, 16) == 96
    assert elite.candidate_count(1.0, 16) == 16
    assert elite.candidate_count(1.01, 16) == 16


# -- the strategies, on a hand-built candidate set ---------------------------------------------

# Twelve uniform draws (λ = 3, n = 4) with repeats; distances and sample counts by index.
BUCKET = np.array([7, 3, 7, 9, 1, 3, 5, 2, 8, 4, 6, 7])
DISTANCE = {7: 0.5, 3: 0.1, 9: 0.9, 1: 0.3, 5: 0.5, 2: 0.7, 8: 0.2, 4: 0.6, 6: 0.4}
TIMES_SAMPLED = {3: 5, 8: 1, 1: 2, 6: 1, 7: 1, 5: 3, 4: 2, 2: 2, 9: 1}
# L by distance, 7 before 5 on their tie because 7 was drawn first: 3 8 1 6 7 5 4 2 9; s = 9 // 4 = 2.
EXPECTED = {
    1: [3, 3, 8, 1],  # L in order, 3 twice because it was drawn twice
    2: [3, 1, 7, 4],  # every second of L
    3: [8, 6, 7, 9],  # sampled once, in L order
    4: [8, 6, 7, 4],  # windows [3 8] [1 6] [7 5] [4 2] [9]: least-sampled of each, 4 before 2 on their tie
}


def ranking_of(bucket: np.ndarray, distance: dict, times_sampled: dict) -> elite.Ranking:
    distinct, multiplicity = elite.distinct_candidates(bucket)
    return elite.rank(distinct, multiplicity, np.array([distance[index] for index in distinct]),
                      np.array([times_sampled[index] for index in distinct]))


def test_ranking_sorts_distinct_candidates_by_distance_keeping_first_appearance_on_ties():
    ranking = ranking_of(BUCKET, DISTANCE, TIMES_SAMPLED)
    np.testing.assert_array_equal(ranking.indices, [3, 8, 1, 6, 7, 5, 4, 2, 9])
    np.testing.assert_array_equal(ranking.multiplicity, [2, 1, 1, 1, 3, 1, 1, 1, 1])
    np.testing.assert_array_equal(ranking.times_sampled, [5, 1, 2, 1, 1, 3, 2, 2, 1])


@pytest.mark.parametrize("strategy", elite.STRATEGIES)
def test_each_strategy_picks_exactly_the_expected_indices(strategy):
    selection = elite.select(strategy, ranking_of(BUCKET, DISTANCE, TIMES_SAMPLED), 4, BUCKET)
    np.testing.assert_array_equal(selection.indices, EXPECTED[strategy])
    assert selection.filled == 0 and selection.indices.dtype == np.int64


# Two distinct candidates for n = 4: every strategy but the first tops up from the bucket's first draws.
FEW_BUCKET = np.array([5, 5, 5, 2, 2, 5, 5, 2])
FEW_EXPECTED = {1: ([2, 2, 2, 5], 0), 2: ([2, 5, 5, 5], 2), 3: ([5, 2, 5, 5], 2), 4: ([2, 5, 5, 5], 2)}


@pytest.mark.parametrize("strategy", elite.STRATEGIES)
def test_fewer_distinct_candidates_than_n_are_topped_up_uniformly(strategy):
    ranking = ranking_of(FEW_BUCKET, {5: 0.3, 2: 0.1}, {5: 1, 2: 4})
    selection = elite.select(strategy, ranking, 4, FEW_BUCKET)
    indices, filled = FEW_EXPECTED[strategy]
    np.testing.assert_array_equal(selection.indices, indices)
    assert selection.filled == filled


@pytest.mark.parametrize("strategy", elite.STRATEGIES)
def test_a_single_distinct_candidate_fills_a_large_batch_without_looping(strategy):
    bucket = np.full(60, 11)
    selection = elite.select(strategy, ranking_of(bucket, {11: 0.0}, {11: 1}), 30, bucket)
    np.testing.assert_array_equal(selection.indices, np.full(30, 11))


def test_elite_insertion_overwrites_the_farthest_candidate_first_on_ties():
    assert elite.farthest(np.array([4, 9, 2, 7]), np.array([0.1, 0.8, 0.8, 0.3])) == 9


# -- the samplers over a real unroll storage ---------------------------------------------------


class DriftedFeatures:
    """Stands for a network that has moved on: current features drift from the stored ones by 0.1·index."""

    def current_features(self, storage, indices):
        return storage.features[indices] + 0.1 * np.asarray(indices, np.float32)[:, None]

    def current_logits(self, storage, indices):
        return storage.logits[indices] + np.asarray(indices, np.float32)[:, None, None] * np.arange(ACTIONS)


def unroll_storage(capacity: int, count: int, seed: int = 0) -> UnrollStorage:
    storage = UnrollStorage(capacity, T, (2,), np.float32, ACTIONS, FEATURES)
    generator = np.random.default_rng(seed)
    for _ in range(count):
        storage.add(generator.normal(size=(T + 1, 2)), generator.integers(ACTIONS, size=T), generator.normal(size=T),
                    generator.random(T) < 0.2, generator.normal(size=(T, ACTIONS)),
                    generator.normal(size=(T + 1, FEATURES)))
    return storage


def elite_settings(**changes) -> ReplaySection:
    return ReplaySection(kind="elite", **changes)


@pytest.mark.parametrize("strategy", elite.STRATEGIES)
@pytest.mark.parametrize("distance", ["ln_norm", "kl_div"])
def test_elite_sampler_scores_its_bucket_with_the_current_network(strategy, distance):
    storage = unroll_storage(40, 40)
    settings = elite_settings(strategy=strategy, distance=distance, lambda_batch_multiplier=4.0)
    sampler, shadow = EliteSampler(7, settings), np.random.default_rng(7)
    before = storage.times_sampled.copy()
    drawn = sampler.sample(storage, 5, features=DriftedFeatures())
    # The same bucket, scored by hand from the stored vectors and the drifted current ones.
    bucket = draw_uniform(storage, shadow, 20, 1)
    distinct, multiplicity = elite.distinct_candidates(bucket)
    if distance == "kl_div":
        current, stored = DriftedFeatures().current_logits(storage, distinct), storage.behaviour_logits[distinct]
        distances = [np.mean([slow_kl(c, s) for c, s in zip(c_item, s_item)])
                     for c_item, s_item in zip(current, stored)]
    else:  # every component drifts by 0.1·index: the norm is 0.1·index·sqrt((T+1)·F), growing with the index
        distances = distinct.astype(float)
    ranking = elite.rank(distinct, multiplicity, np.array(distances), before[distinct])
    np.testing.assert_array_equal(drawn, elite.select(strategy, ranking, 5, bucket).indices)
    # times_sampled: one more per draw of an index (repeats count each time).
    np.testing.assert_array_equal(storage.times_sampled - before, np.bincount(drawn, minlength=40))


def test_elite_sampler_becomes_the_uniform_sampler_once_lambda_reaches_one():
    storage = unroll_storage(30, 30)
    settings = elite_settings(lambda_batch_multiplier=3.0, alpha_annealing_factor=0.5, anneal_steps=6)
    sampler = EliteSampler(5, settings)
    for step in range(3):  # steps 0, 1, 2 anneal; the horizon is 6 · 0.5 = 3 environment steps
        sampler.sample(storage, 8, features=DriftedFeatures(), step=step)
        assert sampler.lambda_value > 1.0
    uniform = UniformSampler()
    uniform.load_state_dict(sampler.state_dict())
    for step in range(3, 6):
        np.testing.assert_array_equal(sampler.sample(storage, 8, features=DriftedFeatures(), step=step),
                                      uniform.sample(storage, 8))
        assert sampler.lambda_value == 1.0


def test_elite_sampler_needs_a_feature_source_and_attentive_does_not():
    storage = unroll_storage(10, 10)
    with pytest.raises(ValueError, match="features=FeatureSource"):
        EliteSampler(0).sample(storage, 4)
    assert len(AttentiveSampler(0).sample(storage, 4)) == 4


@pytest.mark.parametrize("distance", elite.DISTANCES)
def test_attentive_sampler_prefers_candidates_nearest_the_newest_state(distance):
    storage = unroll_storage(20, 20, seed=4)
    sampler = AttentiveSampler(3, ReplaySection(kind="attentive", distance=distance, strategy=1,
                                                lambda_batch_multiplier=5.0))
    drawn = sampler.sample(storage, 4)
    bucket = draw_uniform(storage, np.random.default_rng(3), 20, 1)
    distinct, multiplicity = elite.distinct_candidates(bucket)
    if distance == "kl_div":
        reference, candidates = storage.behaviour_logits[19, T - 1], storage.behaviour_logits[distinct]
    else:
        reference, candidates = storage.unroll_features[19, T], storage.unroll_features[distinct]
    distances = elite.reference_distances(distance, reference, candidates, 2.0)
    ranking = elite.rank(distinct, multiplicity, distances, np.ones(len(distinct)))
    np.testing.assert_array_equal(drawn, elite.select(1, ranking, 4, bucket).indices)
    assert drawn[0] == ranking.indices[0]


@pytest.mark.parametrize("kind", ["elite", "attentive"])
def test_elite_insertion_overwrites_the_farthest_of_its_candidates_once_full(kind):
    settings = ReplaySection(kind=kind, elite_insertion=True, insertion_candidates=3)
    replay = make_replay(kind, 6, 1.0, generator=9, item="unrolls", settings=settings, unroll_length=T,
                         observation_shape=(2,), observation_dtype=np.float32, num_actions=ACTIONS,
                         feature_size=FEATURES)
    mixer = ReplayMixer([replay], 2)
    storage, generator = replay.storage, np.random.default_rng(1)

    def unroll(scale: float) -> dict:
        return dict(observations=np.full((T + 1, 2), scale), actions=np.zeros(T, np.int64), rewards=np.zeros(T),
                    dones=np.zeros(T, bool), behaviour_logits=generator.normal(size=(T, ACTIONS)),
                    features=np.full((T + 1, FEATURES), scale))

    assert [mixer.add_unroll(**unroll(slot), feature_source=DriftedFeatures()) for slot in range(6)] == \
        [[slot] for slot in range(6)]  # filling: in order
    shadow = np.random.default_rng(9)
    candidates = shadow.integers(0, 6, 3)
    if kind == "elite":  # drift 0.1·index: the highest candidate is the farthest
        expected = int(candidates.max())
    else:  # the new unroll's last state is all 100s: the farthest is the smallest stored scale
        expected = int(candidates.min())
    [slot] = mixer.add_unroll(**unroll(100.0), feature_source=DriftedFeatures())
    assert slot == expected and storage.cursor == 0 and len(storage) == 6
    assert storage.unroll_features[slot, 0, 0] == 100.0 and storage.times_sampled[slot] == 1


def test_elite_insertion_is_refused_for_transitions():
    with pytest.raises(ValueError, match="elite_insertion works on unrolls only"):
        make_replay("elite", 10, 1.0, generator=0, settings=elite_settings(elite_insertion=True), num_envs=1,
                    frame_shape=(2,), frame_dtype=np.float32, stack_size=1, feature_size=3)
