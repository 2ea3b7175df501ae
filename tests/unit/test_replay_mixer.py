"""Samplers and the ratio mixer, over every storage layout and every registered sampler."""
from __future__ import annotations

import json

import numpy as np
import pytest

from rlsup.replay import samplers as samplers_module
from rlsup.replay.mixer import Replay, ReplayMixer, batch_shares, make_replay
from rlsup.replay.samplers import SAMPLERS
from rlsup.replay.storage import TransitionStorage

GAMMA = 0.99
LAYOUTS = {
    "stacked": dict(frame_shape=(3, 3), frame_dtype=np.uint8, stack_size=4),
    "vector": dict(frame_shape=(4,), frame_dtype=np.float32, stack_size=1),
}
KINDS = sorted(SAMPLERS)


def fill(sinks: list, layout: str, num_envs: int, steps: int, seed: int = 0) -> None:
    """Episodes of random length in every env, written with the worker's call sequence."""
    generator = np.random.default_rng(seed)
    shape, dtype = LAYOUTS[layout]["frame_shape"], LAYOUTS[layout]["frame_dtype"]
    first = [True] * num_envs
    for step in range(steps):
        env = step % num_envs
        frame = np.full(shape, step % 250, dtype)
        done = generator.random() < 0.1
        for sink in sinks:
            sink.add_step(env, frame, int(generator.integers(4)), 1.0, done, first[env])
            if done:
                sink.add_final(env, np.full(shape, 255, dtype))
        first[env] = done


def storage_for(layout: str, capacity: int = 60, num_envs: int = 2) -> TransitionStorage:
    return TransitionStorage(capacity, num_envs, **LAYOUTS[layout])


# -- samplers --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", KINDS)
def test_sampler_is_deterministic_and_only_draws_valid_items(layout, kind):
    storage = storage_for(layout)
    fill([storage], layout, 2, 200)
    first, second = SAMPLERS[kind](5), SAMPLERS[kind](np.random.default_rng(5))
    for _ in range(20):
        drawn = first.sample(storage, 32, 3)
        np.testing.assert_array_equal(drawn, second.sample(storage, 32, 3))
        assert drawn.dtype == np.int64 and len(drawn) == 32
        assert storage.is_valid(drawn, 3).all()


@pytest.mark.parametrize("kind", KINDS)
def test_sampler_refuses_an_empty_storage(kind):
    with pytest.raises(ValueError, match="empty replay"):
        SAMPLERS[kind](0).sample(storage_for("stacked"), 4, 1)


@pytest.mark.parametrize("kind", KINDS)
def test_sampler_refuses_a_storage_without_complete_transitions(kind):
    storage = storage_for("stacked")
    storage.add_step(0, np.zeros((3, 3), np.uint8), 0, 0.0, False, True)  # no next observation yet
    with pytest.raises(ValueError, match="no complete 1-step transition"):
        SAMPLERS[kind](0).sample(storage, 4, 1)


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
    storage = storage_for("vector")
    fill([storage], "vector", 2, 100)
    sampler = SAMPLERS[kind](3)
    sampler.sample(storage, 10, 1)
    restored = SAMPLERS[kind](99)
    restored.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    np.testing.assert_array_equal(sampler.sample(storage, 50, 1), restored.sample(storage, 50, 1))


def test_sampler_refuses_another_bit_generator():
    state = SAMPLERS["standard"](np.random.Generator(np.random.MT19937(0))).state_dict()
    with pytest.raises(ValueError, match="MT19937"):
        SAMPLERS["standard"](0).load_state_dict(state)


# -- the mixer -------------------------------------------------------------------------------


class CountingSampler:
    """Wraps a real sampler and remembers what each call was asked for and gave."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def sample(self, storage, count, n_step):
        indices = self.inner.sample(storage, count, n_step)
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
                             **LAYOUTS[layout])
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
    batch = mixer.sample(16, 3, GAMMA)
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
