"""The replay parts' contracts: storage base, sampler queries, writers, and one checkpoint protocol for each part."""
from __future__ import annotations

import numpy as np
import pytest

from rlsup.replay.base import ReplayStorage, Sampler, Writer
from rlsup.replay.mixer import QueueFull, Replay, ReplayMixer, make_replay
from rlsup.replay.samplers import SAMPLERS, FifoSampler
from rlsup.replay.storage import TransitionStorage
from rlsup.replay.unrolls import UnrollStorage
from rlsup.replay.writers import EliteInsertionWriter, RingWriter
from rlsup.spec import ReplaySection

T, ACTIONS, FEATURES = 2, 3, 4
LAYOUT = dict(unroll_length=T, observation_shape=(2,), observation_dtype=np.float32, num_actions=ACTIONS,
              feature_size=FEATURES)


def unroll(generator: np.random.Generator) -> dict:
    return dict(observations=generator.normal(size=(T + 1, 2)), actions=generator.integers(ACTIONS, size=T),
                rewards=generator.normal(size=T), dones=np.zeros(T, bool),
                behaviour_logits=generator.normal(size=(T, ACTIONS)), features=generator.normal(size=(T + 1, FEATURES)))


def unroll_replay(kind: str, capacity: int, ratio: float = 1.0, **options) -> Replay:
    settings = ReplaySection(kind=kind, **options)
    return make_replay(kind, capacity, ratio, generator=0, item="unrolls", settings=settings,
                       min_size=settings.min_size, **LAYOUT)


class Drifted:
    def current_features(self, storage, indices):
        return storage.features[indices] + np.asarray(indices, np.float32)[:, None]

    def current_logits(self, storage, indices):
        return storage.logits[indices]


def test_every_storage_and_sampler_implements_its_abstract_base():
    with pytest.raises(TypeError):
        ReplayStorage()  # abstract: a storage must say how it is drawn from, gathered and checkpointed
    assert issubclass(TransitionStorage, ReplayStorage) and issubclass(UnrollStorage, ReplayStorage)
    assert (TransitionStorage.item, UnrollStorage.item) == ("transitions", "unrolls")
    assert all(issubclass(sampler, Sampler) for sampler in SAMPLERS.values())
    assert issubclass(RingWriter, Writer) and issubclass(EliteInsertionWriter, RingWriter)


def test_samplers_answer_ready_and_free_themselves():
    queue, uniform = unroll_replay("queue", 3), unroll_replay("standard", 3)
    generator = np.random.default_rng(0)
    for replay in (queue, uniform):
        replay.writer.add_unroll(replay.storage, **unroll(generator))
    assert queue.sampler.free(queue.storage) == 2 and uniform.sampler.free(uniform.storage) is None
    assert queue.sampler.ready(queue.storage, 1) and not queue.sampler.ready(queue.storage, 2)
    assert queue.sampler.default_minimum(3, 1) == 3 and uniform.sampler.default_minimum(100, 1) == 20


def test_a_full_queue_drops_its_oldest_without_sampling():
    queue = unroll_replay("queue", 2, ratio=0.5)
    other = unroll_replay("standard", 10, ratio=0.5)
    mixer, generator = ReplayMixer([queue, other], batch_size=2), np.random.default_rng(1)
    mixer.add_unroll(**unroll(generator))
    mixer.add_unroll(**unroll(generator))
    with pytest.raises(QueueFull):
        mixer.add_unroll(**unroll(generator))
    before = other.sampler.state_dict()
    mixer.drop_oldest_queued()
    assert mixer.free() == 1 and queue.sampler.state_dict() == {"consumed": 1}
    assert other.sampler.state_dict() == before  # no other replay draws
    mixer.drop_oldest_queued()  # room already: nothing more is dropped
    assert queue.sampler.state_dict() == {"consumed": 1}
    mixer.add_unroll(**unroll(generator))
    np.testing.assert_array_equal(queue.sampler.sample(queue.storage, 2), [1, 0])  # the second, then the third


@pytest.mark.parametrize("kind, insertion, writer", [("elite", True, EliteInsertionWriter),
                                                     ("attentive", True, EliteInsertionWriter),
                                                     ("elite", False, RingWriter),
                                                     ("queue", True, RingWriter)])
def test_the_writer_is_chosen_by_the_table(kind, insertion, writer):
    assert type(unroll_replay(kind, 4, elite_insertion=insertion).writer) is writer


def test_elite_insertion_writer_writes_in_order_until_full_then_overwrites_the_farthest():
    replay = unroll_replay("elite", 4, elite_insertion=True, insertion_candidates=4)
    generator = np.random.default_rng(2)
    slots = [replay.writer.add_unroll(replay.storage, **unroll(generator), feature_source=Drifted())
             for _ in range(4)]
    assert slots == [0, 1, 2, 3]
    candidates = np.random.default_rng(0).integers(0, 4, 4)  # the replay's stream, untouched until now
    slot = replay.writer.add_unroll(replay.storage, **unroll(generator), feature_source=Drifted())
    assert slot == candidates.max()  # drift grows with the index: the highest candidate is the farthest
    with pytest.raises(ValueError, match="features=FeatureSource"):
        replay.writer.add_unroll(replay.storage, **unroll(generator))


def test_each_part_has_its_state_and_a_checkpoint_from_before_writers_loads():
    mixer = ReplayMixer([unroll_replay("elite", 6, elite_insertion=True)], batch_size=2)
    generator = np.random.default_rng(3)
    for _ in range(8):
        mixer.add_unroll(**unroll(generator), feature_source=Drifted())
    state = mixer.state_dict()
    assert set(state["0"]) == {"kind", "capacity", "storage", "sampler", "writer"}
    old = {"0": {key: value for key, value in state["0"].items() if key != "writer"}}
    restored = ReplayMixer([unroll_replay("elite", 6, elite_insertion=True)], batch_size=2)
    restored.load_state_dict(old)
    expected = mixer.sample(2, features=Drifted(), step=1)
    np.testing.assert_array_equal(restored.sample(2, features=Drifted(), step=1).indices, expected.indices)


def test_a_queue_refuses_a_storage_of_transitions():
    storage = TransitionStorage(4, 1, (2,), np.float32, 1)
    with pytest.raises(TypeError, match="consumes whole unrolls"):
        FifoSampler().free(storage)


@pytest.mark.parametrize("kind, options, message", [
    ("queue", {}, "queue replay: a queue replay holds unrolls for vtrace"),
    ("standard", {"elite_insertion": True}, "standard replay: elite_insertion works on unrolls only"),
    ("standard", {"min_size": 11}, "standard replay: must not exceed capacity: min_size 11 exceeds its capacity 10"),
])
def test_make_replay_refuses_by_the_spec_rules(kind, options, message):
    with pytest.raises(ValueError, match=message):
        make_replay(kind, 10, 1.0, generator=0, settings=ReplaySection(kind=kind, **options),
                    min_size=options.get("min_size", 0), num_envs=1, frame_shape=(2,), frame_dtype=np.float32,
                    stack_size=1)
