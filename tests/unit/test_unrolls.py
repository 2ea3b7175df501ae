"""Unroll storage for V-trace, the queue, and every sampler kind's checkpoint round trip over unrolls."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from rlsup.checkpoint.store import load_checkpoint, write_checkpoint
from rlsup.replay.mixer import QueueFull, ReplayMixer, make_replay
from rlsup.replay.unrolls import UnrollBatch, UnrollStorage
from rlsup.spec import ReplaySection

T, ACTIONS, FEATURES = 4, 3, 5
OBSERVATION = (2, 3)
LAYOUT = dict(unroll_length=T, observation_shape=OBSERVATION, observation_dtype=np.uint8, num_actions=ACTIONS,
              feature_size=FEATURES)


def random_unroll(generator: np.random.Generator) -> dict:
    return dict(observations=generator.integers(0, 255, (T + 1,) + OBSERVATION, dtype=np.uint8),
                actions=generator.integers(ACTIONS, size=T), rewards=generator.normal(size=T).astype(np.float32),
                dones=generator.random(T) < 0.25,
                behaviour_logits=generator.normal(size=(T, ACTIONS)).astype(np.float32),
                features=generator.normal(size=(T + 1, FEATURES)).astype(np.float32))


def filled(capacity: int, count: int, seed: int = 0) -> tuple[UnrollStorage, list[dict]]:
    storage, generator = UnrollStorage(capacity, **LAYOUT), np.random.default_rng(seed)
    unrolls = [random_unroll(generator) for _ in range(count)]
    for unroll in unrolls:
        storage.add(**unroll)
    return storage, unrolls


class DriftedFeatures:
    """A network that has moved on: current features and logits drift from the stored ones with the index."""

    def current_features(self, storage, indices):
        return storage.features[indices] + 0.05 * np.asarray(indices, np.float32)[:, None]

    def current_logits(self, storage, indices):
        return storage.logits[indices] + np.asarray(indices, np.float32)[:, None, None] * np.arange(ACTIONS)


# -- the storage -------------------------------------------------------------------------------


def test_gather_returns_the_unrolls_time_major():
    storage, unrolls = filled(8, 5)
    batch = storage.gather(np.array([3, 0, 3]))
    assert isinstance(batch, UnrollBatch)
    assert batch.observations.shape == (T + 1, 3) + OBSERVATION and batch.observations.dtype == np.uint8
    assert batch.actions.shape == (T, 3) and batch.actions.dtype == np.int64
    assert batch.rewards.dtype == np.float32 and batch.dones.dtype == np.bool_
    assert batch.behaviour_logits.shape == (T, 3, ACTIONS) and batch.features.shape == (T + 1, 3, FEATURES)
    for column, index in enumerate([3, 0, 3]):
        np.testing.assert_array_equal(batch.observations[:, column], unrolls[index]["observations"])
        np.testing.assert_array_equal(batch.actions[:, column], unrolls[index]["actions"])
        np.testing.assert_array_equal(batch.rewards[:, column], unrolls[index]["rewards"])
        np.testing.assert_array_equal(batch.dones[:, column], unrolls[index]["dones"])
        np.testing.assert_array_equal(batch.behaviour_logits[:, column], unrolls[index]["behaviour_logits"])
        np.testing.assert_array_equal(batch.features[:, column], unrolls[index]["features"])
    np.testing.assert_array_equal(batch.indices, [3, 0, 3])
    assert all(getattr(batch, name).flags.c_contiguous for name in ("observations", "features"))


def test_the_ring_overwrites_the_oldest_and_exposes_item_views_for_elite():
    storage, unrolls = filled(3, 5)
    assert len(storage) == 3 and storage.added == 5 and storage.last_index == 1
    np.testing.assert_array_equal(storage.gather(np.arange(3)).actions.T,
                                  [unrolls[3]["actions"], unrolls[4]["actions"], unrolls[2]["actions"]])
    assert storage.features.shape == (3, (T + 1) * FEATURES)
    np.testing.assert_array_equal(storage.features[0], unrolls[3]["features"].ravel())
    np.testing.assert_array_equal(storage.newest_state_features(), unrolls[4]["features"][T])
    np.testing.assert_array_equal(storage.newest_state_logits(), unrolls[4]["behaviour_logits"][T - 1])
    assert storage.nbytes > 0 and np.shares_memory(storage.features, storage.unroll_features)


def test_refuses_arrays_of_the_wrong_shape_and_indices_not_stored():
    storage, _ = filled(4, 2)
    unroll = random_unroll(np.random.default_rng(1))
    unroll["actions"] = unroll["actions"][:-1]
    with pytest.raises(ValueError, match=r"actions has shape \(3,\)"):
        storage.add(**unroll)
    with pytest.raises(ValueError, match="cannot gather indices \\[2\\]"):
        storage.gather(np.array([0, 2]))
    with pytest.raises(ValueError, match="empty replay"):
        UnrollStorage(2, **LAYOUT).newest_state_features()


# -- the queue ---------------------------------------------------------------------------------


def unroll_replay(kind: str, capacity: int, ratio: float = 1.0, seed: int = 0, **options):
    settings = ReplaySection(kind=kind, **options)
    return make_replay(kind, capacity, ratio, generator=seed, item="unrolls", settings=settings,
                       min_size=settings.min_size, **LAYOUT)


def test_queue_hands_out_the_oldest_unconsumed_unrolls_in_order_once_each():
    replay = unroll_replay("queue", 4)
    mixer = ReplayMixer([replay], batch_size=2)
    generator, added = np.random.default_rng(0), []
    seen = []
    for _ in range(5):
        while mixer.free():
            unroll = random_unroll(generator)
            mixer.add_unroll(**unroll)
            added.append(unroll["actions"])
        assert mixer.ready()  # full
        with pytest.raises(QueueFull):
            mixer.add_unroll(**random_unroll(generator))
        for _ in range(2):
            seen.extend(mixer.sample(2).actions.T)
        assert not mixer.ready() and mixer.free() == 4
    np.testing.assert_array_equal(seen, added)  # every unroll once, in the order added


def test_queue_readiness_waits_for_min_size_and_refuses_more_than_it_holds():
    replay = unroll_replay("queue", 6, min_size=2)
    mixer = ReplayMixer([replay], batch_size=2)
    generator = np.random.default_rng(0)
    mixer.add_unroll(**random_unroll(generator))
    assert not mixer.ready() and mixer.free() == 5
    mixer.add_unroll(**random_unroll(generator))
    assert mixer.ready()
    mixer.sample(2)
    with pytest.raises(ValueError, match="no unconsumed unrolls"):
        mixer.sample(2)
    mixer.add_unroll(**random_unroll(generator))
    with pytest.raises(ValueError, match="holds 1 unconsumed unrolls, fewer than the 2"):
        mixer.sample(2)


def test_on_policy_queue_of_one_uses_each_unroll_exactly_once():
    mixer = ReplayMixer([unroll_replay("queue", 1)], batch_size=1)
    generator = np.random.default_rng(2)
    for _ in range(4):
        unroll = random_unroll(generator)
        mixer.add_unroll(**unroll)
        assert mixer.free() == 0 and mixer.ready()
        np.testing.assert_array_equal(mixer.sample(1).observations[:, 0], unroll["observations"])


def test_a_full_queue_blocks_every_replay_so_they_all_see_the_same_unrolls():
    mixer = ReplayMixer([unroll_replay("queue", 2, 0.5), unroll_replay("standard", 10, 0.5)], batch_size=4)
    generator = np.random.default_rng(0)
    for _ in range(2):
        mixer.add_unroll(**random_unroll(generator))
    with pytest.raises(QueueFull):
        mixer.add_unroll(**random_unroll(generator))
    assert len(mixer.replays[1].storage) == 2  # the refused unroll went nowhere


def test_standard_on_unrolls_is_uniform_with_replacement():
    storage, _ = filled(10, 10)
    replay = unroll_replay("standard", 10)
    replay.storage = storage
    drawn = replay.sampler.sample(storage, 5000)
    counts = np.bincount(drawn, minlength=10)
    assert counts.sum() == 5000 and counts.min() > 400 and counts.max() < 600  # 500 each, about 5 sigma


# -- every kind through a real checkpoint --------------------------------------------------------

KINDS = ["queue", "standard", "elite", "attentive"]


def checksums(tree: dict) -> dict:
    """crc32 of every array in a state tree, by path: equal iff the contents are."""
    sums = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            sums.update({f"{key}/{inner}": total for inner, total in checksums(value).items()})
        elif isinstance(value, np.ndarray):
            sums[key] = (value.shape, zlib.crc32(np.ascontiguousarray(value).tobytes()))
    return sums


def round_trip(tmp_path: Path, state: dict) -> dict:
    entry = write_checkpoint(tmp_path, {"replay": state}, step=1, episodes=0, reason="pause", fingerprint="-",
                             spec_sha256="-", metrics_bytes=0, keep=1)
    _, loaded = load_checkpoint(entry.path)
    return loaded["replay"]


@pytest.mark.parametrize("distance", ["ln_norm", "kl_div"])
@pytest.mark.parametrize("kind", KINDS)
def test_state_round_trip_restores_draws_and_bookkeeping(tmp_path, kind, distance):
    options = dict(distance=distance, strategy=3, lambda_batch_multiplier=3.0, anneal_steps=4,
                   elite_insertion=kind in ("elite", "attentive"), insertion_candidates=4)

    def build(seed):
        return ReplayMixer([unroll_replay(kind, 12, seed=seed, **options)], batch_size=4)
    mixer, generator = build(0), np.random.default_rng(0)
    source = DriftedFeatures()

    def advance(target: ReplayMixer, unroll_generator: np.random.Generator, step: int) -> UnrollBatch:
        # Five in, four out: a queue grows by one a round; the others fill, then insert by elite insertion.
        for _ in range(5):
            target.add_unroll(**random_unroll(unroll_generator), feature_source=source)
        return target.sample(4, features=source, step=step)

    for step in range(4):  # λ anneals from 3 to 1 over steps 0-7 (anneal_steps 4, alfa 2)
        advance(mixer, generator, step)
    loaded = round_trip(tmp_path, mixer.state_dict())
    assert isinstance(loaded["0"]["storage"]["observations"], np.memmap)
    restored = build(99)
    restored.load_state_dict(loaded)
    assert checksums(restored.state_dict()) == checksums(mixer.state_dict())
    for round_number in range(4):  # identical draws, insertions and bookkeeping from here on
        expected = advance(mixer, np.random.default_rng(round_number), 4 + round_number)
        actual = advance(restored, np.random.default_rng(round_number), 4 + round_number)
        for name in UnrollBatch.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(expected, name), getattr(actual, name))
    assert checksums(restored.state_dict()) == checksums(mixer.state_dict())
    assert restored.replays[0].sampler.state_dict() == mixer.replays[0].sampler.state_dict()


def test_loading_refuses_another_layout(tmp_path):
    storage, _ = filled(4, 3)
    state = round_trip(tmp_path, storage.state_dict())
    with pytest.raises(ValueError, match="layout"):
        UnrollStorage(4, **{**LAYOUT, "feature_size": FEATURES + 1}).load_state_dict(state)
    bigger = UnrollStorage(4, **LAYOUT)
    bigger.load_state_dict(state)
    assert len(bigger) == 3 and bigger.added == 3


def test_a_min_size_above_capacity_is_refused():
    with pytest.raises(ValueError, match="min_size 9 exceeds its capacity 8"):
        unroll_replay("queue", 8, min_size=9)
