"""Transition storage against a naive replay that keeps every whole stacked observation."""
from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlsup.replay.samplers import SAMPLERS
from rlsup.replay.storage import TransitionStorage

GAMMA = 0.9

# Frame layouts under test: small integer "pixels" with a stack, and float vectors without.
LAYOUTS = {
    "stacked": dict(frame_shape=(2, 3), frame_dtype=np.int32, stack_size=4),
    "vector": dict(frame_shape=(4,), frame_dtype=np.float32, stack_size=1),
}


# -- the naive reference ---------------------------------------------------------------------


@dataclass
class Record:
    observation: np.ndarray  # the whole stacked observation, as the env returned it
    action: int
    reward: float
    terminal: bool
    first: bool
    final: bool


@dataclass
class Reference:
    """A replay written straight from the definitions: whole observations, loops, no ring arithmetic."""

    num_envs: int
    stack_size: int
    rows_per_env: int
    records: list = field(default_factory=list)
    stacks: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.records = [[] for _ in range(self.num_envs)]
        self.stacks = [deque(maxlen=self.stack_size) for _ in range(self.num_envs)]

    def observe(self, env: int, frame: np.ndarray, first: bool) -> np.ndarray:
        if first:  # FrameStackObservation(padding_type="reset") repeats the reset frame
            self.stacks[env].extend([frame] * self.stack_size)
        else:
            self.stacks[env].append(frame)
        return np.stack(self.stacks[env]) if self.stack_size > 1 else frame

    def add_step(self, env, frame, action, reward, terminal, first) -> None:
        observation = self.observe(env, frame, first)
        self.records[env].append(Record(observation, action, reward, terminal, first, False))

    def add_final(self, env, frame) -> None:
        self.records[env].append(Record(self.observe(env, frame, False), 0, 0.0, False, False, True))

    def oldest_kept(self, env: int) -> int:
        return max(0, len(self.records[env]) - self.rows_per_env)

    def stack_is_kept(self, env: int, row: int) -> bool:
        records = self.records[env]
        episode_start = max((r for r in range(row + 1) if records[r].first), default=0)
        return max(episode_start, row - self.stack_size + 1) >= self.oldest_kept(env)

    def transition(self, env: int, row: int, n_step: int):
        """(observation, action, return, next observation, discount), or None where it cannot be built."""
        records = self.records[env]
        if not self.oldest_kept(env) <= row < len(records) or records[row].final:
            return None
        total, discount, length = 0.0, GAMMA ** n_step, n_step
        for step in range(n_step):
            if row + step >= len(records):
                return None
            record = records[row + step]
            if step and record.final:
                discount, length = GAMMA ** step, step
                break
            total += GAMMA ** step * record.reward
            if record.terminal:
                discount, length = 0.0, step + 1
                break
        following = row + length
        if following >= len(records) or not self.stack_is_kept(env, row) \
                or not self.stack_is_kept(env, following):
            return None
        return records[row].observation, records[row].action, total, records[following].observation, discount

    def index_of(self, env: int, row: int) -> int:
        return env * self.rows_per_env + row % self.rows_per_env

    def all_transitions(self, n_step: int) -> dict:
        found = {}
        for env in range(self.num_envs):
            for row in range(self.oldest_kept(env), len(self.records[env])):
                transition = self.transition(env, row, n_step)
                if transition is not None:
                    found[self.index_of(env, row)] = transition
        return found


# -- synthetic streams -----------------------------------------------------------------------

OUTCOMES = ("continue", "life_lost", "terminated", "truncated")


def make_frame(layout: str, frame_id: int) -> np.ndarray:
    # Every frame differs from every other, so a frame from the wrong row cannot pass.
    shape, dtype = LAYOUTS[layout]["frame_shape"], LAYOUTS[layout]["frame_dtype"]
    if dtype == np.float32:
        return (frame_id + np.arange(np.prod(shape)).reshape(shape) / 10).astype(dtype)
    return np.full(shape, frame_id, dtype)


class Stream:
    """Drives any number of replays with the worker's call sequence, env by env, interleaved."""

    def __init__(self, layout: str, num_envs: int, sinks: list) -> None:
        self.layout, self.sinks = layout, sinks
        self.frame_ids = 0
        self.pending_first = [True] * num_envs
        self.current = [None] * num_envs

    def continued(self, sinks: list) -> "Stream":
        """The same stream, from where this one is, feeding other replays."""
        stream = Stream(self.layout, len(self.current), sinks)
        stream.frame_ids, stream.pending_first, stream.current = \
            self.frame_ids, list(self.pending_first), list(self.current)
        return stream

    def next_frame(self) -> np.ndarray:
        self.frame_ids += 1
        return make_frame(self.layout, self.frame_ids)

    def step(self, env: int, outcome: str, action: int, reward: float) -> None:
        if self.current[env] is None:
            self.current[env] = self.next_frame()  # reset
        first, self.pending_first[env] = self.pending_first[env], False
        terminal = outcome in ("life_lost", "terminated")
        for sink in self.sinks:
            sink.add_step(env, self.current[env], action, reward, terminal, first)
        self.current[env] = self.next_frame()
        if outcome in ("terminated", "truncated"):
            for sink in self.sinks:
                sink.add_final(env, self.current[env])
            self.current[env], self.pending_first[env] = None, True


def random_events(generator: np.random.Generator, num_envs: int, count: int) -> list:
    outcomes = generator.choice(len(OUTCOMES), size=count, p=[0.75, 0.1, 0.08, 0.07])
    return [(int(generator.integers(num_envs)), OUTCOMES[outcome], int(generator.integers(6)),
             float(generator.integers(-4, 5)) / 2) for outcome in outcomes]


def build(layout: str, capacity: int, num_envs: int) -> tuple[TransitionStorage, Reference]:
    storage = TransitionStorage(capacity, num_envs, **LAYOUTS[layout])
    reference = Reference(num_envs, LAYOUTS[layout]["stack_size"], storage.rows_per_env)
    return storage, reference


def assert_matches_reference(storage: TransitionStorage, reference: Reference, n_step: int) -> None:
    expected = reference.all_transitions(n_step)
    everything = np.arange(storage.num_envs * storage.rows_per_env)
    valid = everything[storage.is_valid(everything, n_step)]
    assert sorted(valid.tolist()) == sorted(expected)
    assert storage.valid_count(n_step) == len(expected)
    assert storage.valid_count_floor(n_step) <= len(expected)
    assert sorted(storage.valid_indices(n_step).tolist()) == sorted(expected)
    if not len(valid):
        return
    storage.is_valid(valid, n_step)  # a sampler's check right before gather: gather reuses its plan
    batch = storage.gather(valid, n_step, GAMMA)
    observations, actions, returns, next_observations, discounts = (
        np.array(column) for column in zip(*(expected[index] for index in valid.tolist())))
    np.testing.assert_array_equal(batch.observations, observations)
    np.testing.assert_array_equal(batch.next_observations, next_observations)
    np.testing.assert_array_equal(batch.actions, actions)
    np.testing.assert_allclose(batch.returns, returns, rtol=1e-6, atol=1e-6)  # float32 storage
    np.testing.assert_allclose(batch.discounts, discounts, rtol=1e-6)
    np.testing.assert_array_equal(batch.indices, valid)
    assert batch.actions.dtype == np.int64 and batch.indices.dtype == np.int64
    assert batch.returns.dtype == np.float32 and batch.discounts.dtype == np.float32


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("capacity, num_envs", [(500, 1), (20, 3), (36, 4)])  # no wrap, wraps, wraps
def test_gather_matches_naive_reference(layout, n_step, capacity, num_envs):
    storage, reference = build(layout, capacity, num_envs)
    stream = Stream(layout, num_envs, [storage, reference])
    for number, event in enumerate(random_events(np.random.default_rng(7), num_envs, 240)):
        stream.step(*event)
        if number % 20 == 19:  # check while rings fill, as they wrap, and long after
            assert_matches_reference(storage, reference, n_step)


@settings(max_examples=200, deadline=None)
@given(layout=st.sampled_from(sorted(LAYOUTS)), num_envs=st.integers(1, 3), rows_per_env=st.integers(1, 10),
       stack_size=st.integers(1, 4), n_step=st.integers(1, 4),
       events=st.lists(st.tuples(st.integers(0, 2), st.sampled_from(OUTCOMES), st.integers(0, 5),
                                 st.integers(-2, 2)), max_size=60))
def test_property_storage_agrees_with_reference(layout, num_envs, rows_per_env, stack_size, n_step, events):
    settings_for_layout = dict(LAYOUTS[layout], stack_size=stack_size)
    storage = TransitionStorage(rows_per_env * num_envs, num_envs, **settings_for_layout)
    reference = Reference(num_envs, stack_size, rows_per_env)
    stream = Stream(layout, num_envs, [storage, reference])
    for env, outcome, action, reward in events:
        stream.step(env % num_envs, outcome, action, float(reward))
    assert_matches_reference(storage, reference, n_step)


def test_a_write_between_check_and_gather_is_seen():
    # gather reuses the plan of the is_valid call just before it: a row written in between must void it.
    storage, reference = build("vector", 4, 1)
    stream = Stream("vector", 1, [storage, reference])
    for event in [(0, "continue", 1, 1.0)] * 4:
        stream.step(*event)
    oldest = storage.stored_indices(np.array([0]))
    assert storage.is_valid(oldest, 1).all()
    stream.step(0, "continue", 2, 5.0)  # overwrites the oldest row, whose transition is then gone
    with pytest.raises(ValueError, match="cannot gather invalid indices"):
        storage.gather(oldest, 1, GAMMA)
    assert_matches_reference(storage, reference, 1)


def test_the_floor_of_valid_transitions_reads_no_rows_and_is_exact_once_rings_are_long():
    storage, reference = build("stacked", 4_000, 2)
    stream = Stream("stacked", 2, [storage, reference])
    for event in random_events(np.random.default_rng(3), 2, 3_000):
        stream.step(*event)
    exact = storage.valid_count(3)
    # Only the stack_size - 1 oldest and n_step newest rows of each ring can be step rows that are not
    # transitions, so the floor is the exact count less at most that many rows per env.
    assert exact - 2 * (storage.stack_size - 1 + 3) <= storage.valid_count_floor(3) <= exact


def test_life_loss_keeps_the_stack_going_and_cuts_bootstrapping():
    storage, reference = build("stacked", 100, 1)
    stream = Stream("stacked", 1, [storage, reference])
    for outcome in ["continue", "continue", "life_lost", "continue", "continue"]:
        stream.step(0, outcome, 1, 1.0)
    batch = storage.gather(np.array([2, 3]), 1, GAMMA)
    # Row 3 follows the life loss without a reset: its stack still holds frames 1..4.
    np.testing.assert_array_equal(batch.observations[1][:, 0, 0], [1, 2, 3, 4])
    np.testing.assert_allclose(batch.discounts, [0.0, GAMMA], rtol=1e-6)


def test_truncation_bootstraps_from_the_final_observation():
    storage, reference = build("stacked", 100, 1)
    stream = Stream("stacked", 1, [storage, reference])
    for outcome in ["continue", "truncated", "continue", "continue", "continue"]:
        stream.step(0, outcome, 1, 1.0)
    batch = storage.gather(np.array([0]), 3, GAMMA)
    # Two rewards, then the final row ends the window: bootstrap from it with gamma ** 2.
    np.testing.assert_allclose(batch.returns, [1 + GAMMA])
    np.testing.assert_allclose(batch.discounts, [GAMMA ** 2])
    np.testing.assert_array_equal(batch.next_observations[0][:, 0, 0], [1, 1, 2, 3])
    assert not storage.is_valid(np.array([2]), 1)[0]  # a final row starts no transition


def test_atari_frames_are_stored_once():
    storage = TransitionStorage(1000, 8, (84, 84), np.uint8, 4)
    per_row_extras = 4 + 4 + 3  # int32 action, float32 reward, three flags
    assert storage.rows_per_env * storage.num_envs == 1000
    assert storage.nbytes == 1000 * (84 * 84 + per_row_extras)
    # Not 4 frames per stack nor again for the next observation: 8 frames per transition.
    assert storage.nbytes < 1.01 * 1000 * 84 * 84


def test_rows_per_env_round_up():
    assert TransitionStorage(10, 3, (1,), np.float32, 1).rows_per_env == 4


def add_final_twice(storage: TransitionStorage) -> None:
    storage.add_final(0, np.zeros((2, 3), np.int32))
    storage.add_final(0, np.zeros((2, 3), np.int32))


@pytest.mark.parametrize("call, message", [
    (lambda storage: storage.add_step(0, np.zeros((2, 3), np.int32), 0, 0.0, False, True), "add_final"),
    (add_final_twice, "twice"),
    (lambda storage: storage.add_step(0, np.zeros((3, 2), np.int32), 0, 0.0, False, False), "shape"),
    (lambda storage: storage.add_step(0, np.zeros((2, 3), np.float64), 0, 0.0, False, False), "dtype"),
    (lambda storage: storage.add_step(5, np.zeros((2, 3), np.int32), 0, 0.0, False, False), "env 5"),
])
def test_refuses_calls_that_break_the_stream(call, message):
    storage = TransitionStorage(10, 2, (2, 3), np.int32, 4)
    storage.add_step(0, np.zeros((2, 3), np.int32), 0, 0.0, False, True)
    with pytest.raises((ValueError, IndexError), match=message):
        call(storage)


def test_step_after_final_must_start_an_episode():
    storage = TransitionStorage(10, 1, (2, 3), np.int32, 4)
    storage.add_step(0, np.zeros((2, 3), np.int32), 0, 0.0, True, True)
    storage.add_final(0, np.zeros((2, 3), np.int32))
    with pytest.raises(ValueError, match="first=True"):
        storage.add_step(0, np.zeros((2, 3), np.int32), 0, 0.0, False, False)


def test_gather_refuses_invalid_indices():
    storage, reference = build("stacked", 100, 1)
    Stream("stacked", 1, [storage, reference]).step(0, "continue", 0, 0.0)
    with pytest.raises(ValueError, match="invalid indices"):
        storage.gather(np.array([0]), 1, GAMMA)  # its next observation is not stored yet


# -- checkpoint contract ---------------------------------------------------------------------


def save_tree(tree: dict, directory: Path) -> None:
    """Arrays to .npy and the rest to JSON, as the checkpoint store does."""
    directory.mkdir(parents=True, exist_ok=True)
    rest = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            save_tree(value, directory / key)
        elif isinstance(value, np.ndarray):
            np.save(directory / f"{key}.npy", value)
        else:
            rest[key] = value
    (directory / "rest.json").write_text(json.dumps(rest))


def load_tree(directory: Path) -> dict:
    tree = json.loads((directory / "rest.json").read_text())
    for path in directory.iterdir():
        if path.is_dir():
            tree[path.name] = load_tree(path)
        elif path.suffix == ".npy":
            tree[path.stem] = np.load(path, mmap_mode="r", allow_pickle=False)
    return tree


def filled_storage(layout: str, capacity: int, num_envs: int, events: list):
    storage, reference = build(layout, capacity, num_envs)
    stream = Stream(layout, num_envs, [storage, reference])
    for event in events:
        stream.step(*event)
    return storage, stream


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", ["standard"])  # elite, attentive and queue round-trip in test_unrolls.py and test_replay_mixer.py
@pytest.mark.parametrize("capacity", [30, 1000])  # wrapped rings, and rings still filling
def test_state_round_trip_through_npy_and_json(tmp_path, layout, kind, capacity):
    events = random_events(np.random.default_rng(3), 3, 150)
    storage, stream = filled_storage(layout, capacity, 3, events)
    sampler = SAMPLERS[kind](np.random.default_rng(11))
    sampler.sample(storage, 5, 3)
    save_tree({"storage": storage.state_dict(), "sampler": sampler.state_dict()}, tmp_path / "replay")

    loaded = load_tree(tmp_path / "replay")
    frames = loaded["storage"]["frames"]
    assert isinstance(frames, np.memmap) and not frames.flags.writeable
    restored = TransitionStorage(capacity, 3, **LAYOUTS[layout])
    restored.load_state_dict(loaded["storage"])
    restored_sampler = SAMPLERS[kind](np.random.default_rng(0))
    restored_sampler.load_state_dict(loaded["sampler"])

    continued = stream.continued([storage, restored])
    for rounds in range(2):  # identical now, and after both take the same further steps
        indices = sampler.sample(storage, 64, 3)
        np.testing.assert_array_equal(indices, restored_sampler.sample(restored, 64, 3))
        expected, actual = storage.gather(indices, 3, GAMMA), restored.gather(indices, 3, GAMMA)
        for name in expected.__dataclass_fields__:
            np.testing.assert_array_equal(getattr(expected, name), getattr(actual, name))
        assert restored.valid_count(3) == storage.valid_count(3)
        for event in random_events(np.random.default_rng(rounds), 3, 40):
            continued.step(*event)


def test_state_dict_returns_views_of_the_buffers():
    storage, _ = filled_storage("stacked", 30, 3, random_events(np.random.default_rng(1), 3, 50))
    state = storage.state_dict()
    for name in ("frames", "actions", "rewards", "terminals", "firsts", "finals"):
        assert np.shares_memory(state[name], getattr(storage, name))
        assert state[name].flags.c_contiguous  # written straight to .npy, no copy
    assert all(type(value) is int for value in state["cursors"] + state["sizes"])
    json.dumps({key: value for key, value in state.items() if not isinstance(value, np.ndarray)})


@pytest.mark.parametrize("change, message", [
    (lambda state: state.update(frames=state["frames"].astype(np.int64)), "frames has shape"),
    (lambda state: state.update(rewards=state["rewards"][:-1]), "rewards has shape"),
    (lambda state: state.update(num_envs=2), "num_envs"),
    (lambda state: state.update(sizes=state["sizes"][:2] + [99]), "env 2 has size 99"),
    (lambda state: state.pop("finals"), "lacks"),
])
def test_load_refuses_a_state_that_does_not_fit(change, message):
    storage, _ = filled_storage("stacked", 30, 3, random_events(np.random.default_rng(1), 3, 50))
    state = dict(storage.state_dict())
    change(state)
    with pytest.raises(ValueError, match=message):
        TransitionStorage(30, 3, **LAYOUTS["stacked"]).load_state_dict(state)


def test_loading_into_a_used_storage_leaves_nothing_of_its_past():
    events = random_events(np.random.default_rng(4), 3, 300)
    used, _ = filled_storage("stacked", 1000, 3, events)
    small, stream = filled_storage("stacked", 1000, 3, events[:40])
    used.load_state_dict(small.state_dict())
    continued = stream.continued([used, small])
    for event in random_events(np.random.default_rng(5), 3, 30):
        continued.step(*event)
    for name, value in small.state_dict().items():
        np.testing.assert_array_equal(used.state_dict()[name], value)
