"""The actors' shared unroll slots: made in shared memory at once, costing memory only as rounds fill them."""
from __future__ import annotations

import numpy as np
import psutil

from rlsup.algos.actor_processes import MAX_GROUPS_PER_ACTOR, groups_per_actor, learner_alive
from rlsup.algos.children import helper_context
from rlsup.algos.shared_memory import UnrollGroups, UnrollLayout
from rlsup.spec import VtraceSection

# 4 groups of 40,000 envs of 20-step unrolls with 128 features: about 1.6 GiB of slots.
LAYOUT = UnrollLayout(envs=40_000, unroll_length=20, observation_shape=(4,), observation_dtype=np.dtype(np.float32),
                      num_actions=6, feature_size=128)


def test_shared_slots_take_no_memory_until_written_and_read_back_what_is_written() -> None:
    # They were zeroed in private memory and then copied into shared memory: every page written twice
    # before any actor ran (26 s of a test asking for 100,000 envs, on a VM's slow page faults).
    process = psutil.Process()
    before = process.memory_info().rss
    groups = UnrollGroups(LAYOUT, 4, shared=True)
    assert sum(tensor.nbytes for tensor in groups.tensors.values()) > 1.5 * 2**30
    assert all(tensor.is_shared() for tensor in groups.tensors.values())
    assert process.memory_info().rss - before < 64 * 2**20

    arrays = groups.group(3)
    assert not arrays.features[-1].any() and not arrays.dones.any()  # zeros, as a fresh round expects
    arrays.features[-1, -1] = 7.0
    arrays.actions[5] = np.arange(LAYOUT.unroll_length)
    again = groups.group(3)
    assert again.features[-1, -1].tolist() == [7.0] * LAYOUT.feature_size
    assert again.actions[5].tolist() == list(range(LAYOUT.unroll_length))
    assert not groups.group(2).features[-1, -1].any()


def test_private_slots_are_plain_zeroed_tensors() -> None:
    groups = UnrollGroups(UnrollLayout(2, 5, (3, 4), np.dtype(np.uint8), 3, 8), 1, shared=False)
    arrays = groups.group(0)
    assert arrays.observations.shape == (2, 6, 3, 4) and arrays.observations.dtype == np.uint8
    assert not any(tensor.is_shared() for tensor in groups.tensors.values())
    assert not arrays.observations.any()


def test_each_actor_gets_groups_for_its_share_of_a_batch_within_a_floor_and_a_cap() -> None:
    def groups(actors: int, envs: int, batch: int) -> int:
        return groups_per_actor(VtraceSection(actors=actors, envs_per_actor=envs, batch_size=batch))
    assert groups(2, 8, 16) == 2     # jobs/minatar-vtrace.toml: one round of all actors is a batch
    assert groups(2, 4, 16) == 2     # jobs/cartpole-vtrace.toml: two rounds each
    assert groups(2, 4, 32) == 4     # bench/vtrace_throughput.py's Pong
    assert groups(2, 4, 33) == 5     # a batch that needs part of a fifth round
    assert groups(8, 4, 8) == 2      # more than a batch a round: never fewer than two
    assert groups(1, 1, 256) == MAX_GROUPS_PER_ACTOR


def test_an_actor_sees_its_learner_die_by_the_pipe_the_learner_holds() -> None:
    # Actors' parent is the fork server, not the learner: only the pipe's end of file says the learner is gone.
    reader, writer = helper_context().Pipe(duplex=False)
    assert learner_alive(reader) and learner_alive(reader)  # polling reads nothing, so it can repeat
    writer.close()
    assert not learner_alive(reader)
    reader.close()
    assert not learner_alive(reader)
