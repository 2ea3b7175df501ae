"""Samplers and the ratio mixer, over every storage layout and every registered sampler."""
from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from rlsup.checkpoint.store import load_checkpoint, write_checkpoint
from rlsup.replay import samplers as samplers_module
from rlsup.replay.mixer import Replay, ReplayMixer, batch_shares, make_replay
from rlsup.replay.samplers import SAMPLERS
from rlsup.replay.storage import TransitionStorage
from rlsup.spec import ReplaySection

GAMMA = 0.99
LAYOUTS = {
    "stacked": dict(frame_shape=(3, 3), frame_dtype=np.uint8, stack_size=4),
    "vector": dict(frame_shape=(4,), frame_dtype=np.float32, stack_size=1),
}
# The sampler kinds that draw transitions (a queue consumes whole unrolls: tests/unit/test_unrolls.py).
KINDS = ["attentive", "elite", "standard"]
SCORED = ("elite", "attentive")
FEATURE_SIZE, NUM_ACTIONS = 3, 4
UNROLL_LAYOUT = dict(unroll_length=2, observation_shape=(3,), observation_dtype=np.float32, num_actions=NUM_ACTIONS,
                     feature_size=FEATURE_SIZE)


class ProjectedFrames:
    """A stand-in network: tanh of a fixed random projection of the newest frame, for features and logits.

    Two seeds play the actor's older network (features stored at insertion) and the learner's current one.
    """

    def __init__(self, seed: int) -> None:
        generator = np.random.default_rng(seed)
        self.feature_weights = generator.normal(size=(9, FEATURE_SIZE))
        self.logit_weights = generator.normal(size=(9, NUM_ACTIONS))

    def of_frames(self, frames: np.ndarray, weights: np.ndarray) -> np.ndarray:
        flat = np.asarray(frames, np.float64).reshape(len(frames), -1) / 255.0
        return np.tanh(flat @ weights[:flat.shape[1]]).astype(np.float32)

    def newest_frames(self, storage: TransitionStorage, indices: np.ndarray) -> np.ndarray:
        observations = storage.observations_at(indices)
        return observations[:, -1] if storage.stack_size > 1 else observations

    def current_features(self, storage, indices):
        return self.of_frames(self.newest_frames(storage, indices), self.feature_weights)

    def current_logits(self, storage, indices):
        return self.of_frames(self.newest_frames(storage, indices), self.logit_weights)


ACTOR, LEARNER = ProjectedFrames(0), ProjectedFrames(1)


def fill(sinks: list, layout: str, num_envs: int, steps: int, seed: int = 0) -> None:
    """Episodes of random length in every env, written with the worker's call sequence."""
    generator = np.random.default_rng(seed)
    shape, dtype = LAYOUTS[layout]["frame_shape"], LAYOUTS[layout]["frame_dtype"]
    first = [True] * num_envs
    for step in range(steps):
        env = step % num_envs
        frame = np.full(shape, step % 250, dtype)
        done = generator.random() < 0.1
        features = ACTOR.of_frames(frame[None], ACTOR.feature_weights)[0]
        logits = ACTOR.of_frames(frame[None], ACTOR.logit_weights)[0]
        for sink in sinks:
            keeps = sink if isinstance(sink, TransitionStorage) else None
            sink.add_step(env, frame, int(generator.integers(4)), 1.0, done, first[env],
                          features if keeps is None or keeps.feature_size else None,
                          logits if keeps is None or keeps.num_actions else None)
            if done:
                sink.add_final(env, np.full(shape, 255, dtype))
        first[env] = done


def scoring(kind: str) -> dict:
    return dict(feature_size=FEATURE_SIZE, num_actions=NUM_ACTIONS) if kind in SCORED else {}


def storage_for(layout: str, capacity: int = 60, num_envs: int = 2, kind: str = "standard") -> TransitionStorage:
    return TransitionStorage(capacity, num_envs, **LAYOUTS[layout], **scoring(kind))


def test_every_replay_kind_has_a_sampler():
    assert sorted(SAMPLERS) == ["attentive", "elite", "queue", "standard"]


# -- samplers --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", KINDS)
def test_sampler_is_deterministic_and_only_draws_valid_items(layout, kind):
    storage, twin = storage_for(layout, kind=kind), storage_for(layout, kind=kind)
    fill([storage, twin], layout, 2, 200)
    first, second = SAMPLERS[kind](5), SAMPLERS[kind](np.random.default_rng(5))
    for _ in range(20):
        drawn = first.sample(storage, 32, 3, LEARNER)
        np.testing.assert_array_equal(drawn, second.sample(twin, 32, 3, LEARNER))
        assert drawn.dtype == np.int64 and len(drawn) == 32
        assert storage.is_valid(drawn, 3).all()


@pytest.mark.parametrize("kind", KINDS)
def test_sampler_refuses_an_empty_storage(kind):
    with pytest.raises(ValueError, match="empty replay"):
        SAMPLERS[kind](0).sample(storage_for("stacked", kind=kind), 4, 1, LEARNER)


@pytest.mark.parametrize("kind", KINDS)
def test_sampler_refuses_a_storage_without_complete_transitions(kind):
    storage = storage_for("stacked", kind=kind)
    fill([storage], "stacked", 1, 1)  # no next observation yet
    with pytest.raises(ValueError, match="no complete 1-step transition"):
        SAMPLERS[kind](0).sample(storage, 4, 1, LEARNER)


def test_uniform_sampler_covers_valid_items_evenly():
    storage = storage_for("vector", capacity=40)
    fill([storage], "vector", 2, 120)
    valid = storage.valid_indices(1)
    drawn = SAMPLERS["standard"](1).sample(storage, 200 * len(valid), 1)
    counts = np.array([np.count_nonzero(drawn == index) for index in valid])
    assert counts.sum() == len(drawn)
    assert counts.min() > 140 and counts.max() < 260  # 200 expected each; about 5 sigma either side


def test_uniform_sampler_fallback_after_rejection_rounds(monkeypatch):
    storage = storage_for("stacked")
    fill([storage], "stacked", 2, 200)
    monkeypatch.setattr(samplers_module, "REJECTION_ROUNDS", 0)  # every draw comes from the fallback
    first, second = SAMPLERS["standard"](2), SAMPLERS["standard"](2)
    drawn = first.sample(storage, 64, 3)
    np.testing.assert_array_equal(drawn, second.sample(storage, 64, 3))
    assert storage.is_valid(drawn, 3).all()


@pytest.mark.parametrize("kind", KINDS)
def test_sampler_state_survives_json(kind):
    storage = storage_for("vector", kind=kind)
    fill([storage], "vector", 2, 100)
    sampler = SAMPLERS[kind](3)
    sampler.sample(storage, 10, 1, LEARNER)
    restored = SAMPLERS[kind](99)
    restored.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    twin = storage_for("vector", kind=kind)
    twin.load_state_dict(storage.state_dict())
    np.testing.assert_array_equal(sampler.sample(storage, 50, 1, LEARNER), restored.sample(twin, 50, 1, LEARNER))


def test_sampler_refuses_another_bit_generator():
    state = SAMPLERS["standard"](np.random.Generator(np.random.MT19937(0))).state_dict()
    with pytest.raises(ValueError, match="MT19937"):
        SAMPLERS["standard"](0).load_state_dict(state)


# -- the mixer -------------------------------------------------------------------------------


class CountingSampler:
    """Wraps a real sampler and remembers what each call was asked for and gave."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def __getattr__(self, name):  # the rest of the sampler contract (ready, free, ...) as the inner one answers
        return getattr(self.inner, name)

    def sample(self, storage, count, n_step=1, features=None, step=0):
        indices = self.inner.sample(storage, count, n_step, features, step)
        self.calls.append((count, indices))
        return indices

    def state_dict(self):
        return self.inner.state_dict()

    def load_state_dict(self, state):
        self.inner.load_state_dict(state)


def make_replays(ratios: list, layout: str, kind: str, first_seed: int = 0) -> list:
    replays = []
    for number, ratio in enumerate(ratios):
        replay = make_replay(kind, 40 + 20 * number, ratio, num_envs=2, generator=first_seed + number,
                             **LAYOUTS[layout], **scoring(kind))
        replay.sampler = CountingSampler(replay.sampler)
        replays.append(replay)
    return replays


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("ratios", [[1.0], [0.5, 0.5], [0.25, 0.25, 0.5]])
def test_each_replay_gives_its_share_in_order(ratios, kind, layout):
    replays = make_replays(ratios, layout, kind)
    mixer = ReplayMixer(replays, batch_size=16)
    fill([mixer], layout, 2, 150)
    batch = mixer.sample(16, 3, GAMMA, LEARNER)
    assert len(batch.indices) == 16
    start = 0
    for replay, ratio in zip(replays, ratios):
        (count, indices), = replay.sampler.calls
        assert count == ratio * 16
        part = replay.storage.gather(indices, 3, GAMMA)
        np.testing.assert_array_equal(batch.observations[start:start + count], part.observations)
        np.testing.assert_array_equal(batch.next_observations[start:start + count], part.next_observations)
        np.testing.assert_array_equal(batch.returns[start:start + count], part.returns)
        start += count
    stack_size = LAYOUTS[layout]["stack_size"]
    frame_shape = LAYOUTS[layout]["frame_shape"]
    assert batch.observations.shape == (16,) + ((stack_size,) if stack_size > 1 else ()) + frame_shape


def test_every_replay_sees_every_transition():
    replays = make_replays([0.5, 0.5], "stacked", "standard")
    fill([ReplayMixer(replays, 8)], "stacked", 2, 30)
    reference = TransitionStorage(40, 2, **LAYOUTS["stacked"])
    fill([reference], "stacked", 2, 30)
    for replay in replays:  # 30 steps wrap none of these rings, so their rows line up one to one
        for name in ("frames", "actions", "terminals", "firsts", "finals", "sizes"):
            np.testing.assert_array_equal(replay.storage.state_dict()[name], reference.state_dict()[name])


@pytest.mark.parametrize("ratios, batch_size, message", [
    ([0.5, 0.4], 10, "sum to 1"),
    ([0.6, 0.6], 10, "sum to 1"),
    ([0.3, 0.7], 8, "replay 0 .*2.4 items"),
    ([0.5, 0.25, 0.25], 6, "replay 1 .*1.5 items"),
    ([1.0, 0.0], 8, "replay 1 "),
])
def test_refuses_ratios_that_do_not_split_the_batch(ratios, batch_size, message):
    with pytest.raises(ValueError, match=message):
        ReplayMixer(make_replays(ratios, "vector", "standard"), batch_size)


def test_accepts_ratios_that_add_up_only_in_decimal():
    assert batch_shares(make_replays([0.1, 0.2, 0.7], "vector", "standard"), 10) == [1, 2, 7]


def test_refuses_an_unknown_kind_and_no_replays():
    with pytest.raises(ValueError, match="unknown replay kind 'fancy'"):
        make_replay("fancy", 10, 1.0, num_envs=1, frame_shape=(1,), frame_dtype=np.float32, stack_size=1,
                    generator=0)
    with pytest.raises(ValueError, match="at least one replay"):
        ReplayMixer([], 8)


def test_ready_waits_for_every_replay():
    replays = make_replays([0.5, 0.5], "vector", "standard")
    mixer = ReplayMixer(replays, 8)
    assert not mixer.ready(1)
    fill([mixer], "vector", 2, 30)
    counts = [replay.storage.valid_count() for replay in replays]
    assert mixer.ready(min(counts)) and not mixer.ready(max(counts) + 1)
    assert mixer.ready([counts[0], counts[1]]) and not mixer.ready([counts[0], counts[1] + 1])


def test_mixer_state_round_trip():
    mixer = ReplayMixer(make_replays([0.5, 0.5], "stacked", "standard"), 8)
    fill([mixer], "stacked", 2, 100)
    mixer.sample(8, 2, GAMMA)
    state = mixer.state_dict()
    assert sorted(state) == ["0", "1"] and set(state["0"]) >= {"storage", "sampler"}
    restored = ReplayMixer(make_replays([0.5, 0.5], "stacked", "standard", first_seed=50), 8)
    restored.load_state_dict(state)
    for _ in range(3):
        expected, actual = mixer.sample(8, 2, GAMMA), restored.sample(8, 2, GAMMA)
        for name in expected.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(expected, name), getattr(actual, name))


def test_mixer_refuses_a_state_of_other_replays():
    state = ReplayMixer(make_replays([0.5, 0.5], "vector", "standard"), 8).state_dict()
    with pytest.raises(ValueError, match="replays"):
        ReplayMixer(make_replays([1.0], "vector", "standard"), 8).load_state_dict(state)
    other = ReplayMixer([Replay("standard", 999, 0.5, storage_for("vector"), SAMPLERS["standard"](0)),
                         *make_replays([0.5], "vector", "standard")], 8)
    with pytest.raises(ValueError, match="replay 0: saved as standard with capacity 40"):
        other.load_state_dict(state)


# -- the new kinds: shares, refusals, readiness, and storage × sampler round trips -------------


def unroll_replay(kind: str, capacity: int, ratio: float, seed: int = 0, **options) -> Replay:
    settings = ReplaySection(kind=kind, **options)
    return make_replay(kind, capacity, ratio, generator=seed, item="unrolls", settings=settings,
                       min_size=settings.min_size, **UNROLL_LAYOUT)


class UnrollFeatures:
    """The learner's view of stored unrolls: the actor's features and logits, each slot drifted by its index."""

    def current_features(self, storage, indices):
        return storage.features[indices] + 0.01 * np.asarray(indices, np.float32)[:, None]

    def current_logits(self, storage, indices):
        return storage.logits[indices] * (1.0 + 0.01 * np.asarray(indices, np.float32)[:, None, None])


def add_unrolls(mixer: ReplayMixer, count: int, seed: int = 0) -> None:
    generator = np.random.default_rng(seed)
    for _ in range(count):
        mixer.add_unroll(generator.normal(size=(3, 3)), generator.integers(NUM_ACTIONS, size=2),
                         generator.normal(size=2),
                         generator.random(2) < 0.3, generator.normal(size=(2, NUM_ACTIONS)),
                         generator.normal(size=(3, FEATURE_SIZE)), feature_source=UnrollFeatures())


@pytest.mark.parametrize("second", ["elite", "attentive", "standard"])
def test_queue_and_a_replay_each_give_half_of_a_batch_of_32(second):
    queue, other = unroll_replay("queue", 16, 0.5), unroll_replay(second, 100, 0.5, seed=1)
    for replay in (queue, other):
        replay.sampler = CountingSampler(replay.sampler)
    mixer = ReplayMixer([queue, other], batch_size=32)
    assert mixer.shares == [16, 16]
    add_unrolls(mixer, 16)
    batch = mixer.sample(32, features=UnrollFeatures())
    assert batch.actions.shape == (2, 32) and batch.observations.shape == (3, 32, 3)
    (queue_count, queue_indices), = queue.sampler.calls
    (other_count, other_indices), = other.sampler.calls
    assert (queue_count, other_count) == (16, 16)
    np.testing.assert_array_equal(queue_indices, np.arange(16))  # the queue: all 16, oldest first
    np.testing.assert_array_equal(batch.indices, np.concatenate([queue_indices, other_indices]))
    np.testing.assert_array_equal(batch.features[:, 16:], other.storage.gather(other_indices).features)


@pytest.mark.parametrize("kind", ["queue", "standard", "elite", "attentive"])
@pytest.mark.parametrize("ratios, batch_size, message", [
    ([0.5, 0.4], 10, "sum to 1"),
    ([0.6, 0.6], 10, "sum to 1"),
    ([0.3, 0.7], 8, "replay 0 .*2.4 items"),
    ([0.25, 0.25, 0.5], 6, "replay 0 .*1.5 items"),
])
def test_every_kind_is_refused_ratios_that_do_not_split_the_batch(kind, ratios, batch_size, message):
    with pytest.raises(ValueError, match=message):
        ReplayMixer([unroll_replay(kind, 50, ratio) for ratio in ratios], batch_size)


def test_refuses_a_queue_smaller_than_its_share_a_queue_of_transitions_and_mixed_items():
    with pytest.raises(ValueError, match="capacity 8 is below its share of 16"):
        ReplayMixer([unroll_replay("queue", 8, 0.5), unroll_replay("elite", 50, 0.5)], 32)
    with pytest.raises(ValueError, match="queue replay holds unrolls"):
        make_replay("queue", 10, 1.0, generator=0, num_envs=1, frame_shape=(4,), frame_dtype=np.float32,
                    stack_size=1)
    with pytest.raises(ValueError, match="same items"):
        ReplayMixer([unroll_replay("queue", 8, 0.5), *make_replays([0.5], "vector", "standard")], 8)
    with pytest.raises(ValueError, match="unknown replay item 'episodes'"):
        make_replay("standard", 10, 1.0, generator=0, item="episodes")


@pytest.mark.parametrize("kind, capacity, min_size, expected", [
    ("queue", 40, 0, 40),         # a queue: full
    ("queue", 40, 5, 5),
    ("standard", 1000, 0, 200),   # 20% of capacity
    ("elite", 100, 0, 40),        # 10 shares of 4
    ("attentive", 30, 0, 30),     # 10 shares would never fit: capacity
    ("standard", 1000, 7, 7),
])
def test_default_readiness(kind, capacity, min_size, expected):
    replay = unroll_replay(kind, capacity, 1.0, min_size=min_size)
    mixer = ReplayMixer([replay], batch_size=4)
    assert replay.default_minimum(4) == expected
    add_unrolls(mixer, expected - 1)
    assert not mixer.ready()
    add_unrolls(mixer, 1, seed=1)
    assert mixer.ready()


def checksums(tree: dict) -> dict:
    sums = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            sums.update({f"{key}/{inner}": total for inner, total in checksums(value).items()})
        elif isinstance(value, np.ndarray):
            sums[key] = (value.shape, zlib.crc32(np.ascontiguousarray(value).tobytes()))
    return sums


def fill_more(mixer: ReplayMixer, layout: str, seed: int) -> None:
    """Close the episodes in flight (truncated), then more episodes as fill writes them."""
    for env in range(2):
        if not mixer.replays[0].storage.last_row_is_final(env):
            mixer.add_final(env, np.full(LAYOUTS[layout]["frame_shape"], 7, LAYOUTS[layout]["frame_dtype"]))
    fill([mixer], layout, 2, 30, seed=seed)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind, distance", [("standard", "ln_norm")] + [
    (kind, distance) for kind in SCORED for distance in ("ln_norm", "cos_dist", "kl_div")])
def test_transition_replays_restore_identical_draws_through_a_checkpoint(tmp_path, layout, kind, distance):
    settings = ReplaySection(kind=kind, distance=distance, strategy=4, lambda_batch_multiplier=3.0, anneal_steps=3)

    def build(seed: int) -> ReplayMixer:
        replay = make_replay(kind, 50, 1.0, generator=seed, settings=settings, num_envs=2, **LAYOUTS[layout],
                             **scoring(kind))
        return ReplayMixer([replay], batch_size=8)

    mixer = build(0)
    fill([mixer], layout, 2, 120)
    for step in range(3):  # λ anneals from 3 to 1 over steps 0-5 (anneal_steps 3, alpha 2)
        mixer.sample(8, 2, GAMMA, LEARNER, step)
    entry = write_checkpoint(tmp_path, {"replay": mixer.state_dict()}, step=1, episodes=0, reason="pause",
                             fingerprint="-", spec_sha256="-", metrics_bytes=0, keep=1)
    loaded = load_checkpoint(entry.path)[1]["replay"]
    assert isinstance(loaded["0"]["storage"]["frames"], np.memmap)
    restored = build(42)
    restored.load_state_dict(loaded)
    assert checksums(restored.state_dict()) == checksums(mixer.state_dict())
    for round_number in range(3):  # the same draws now and after both take the same further steps
        step = 3 + round_number
        expected, actual = mixer.sample(8, 2, GAMMA, LEARNER, step), restored.sample(8, 2, GAMMA, LEARNER, step)
        for name in expected.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(expected, name), getattr(actual, name))
        for sink in (mixer, restored):
            fill_more(sink, layout, seed=round_number + 1)
    assert checksums(restored.state_dict()) == checksums(mixer.state_dict())
    assert json.dumps(restored.replays[0].sampler.state_dict()) == json.dumps(mixer.replays[0].sampler.state_dict())


def test_scored_storage_refuses_a_state_without_features():
    plain, scored = storage_for("vector"), storage_for("vector", kind="elite")
    fill([plain], "vector", 2, 20)
    with pytest.raises(ValueError, match="lacks"):
        scored.load_state_dict(plain.state_dict())
    with pytest.raises(ValueError, match="keeps features"):
        SAMPLERS["elite"](0).sample(plain, 4, 1, LEARNER)
