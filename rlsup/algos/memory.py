"""Whether a job's replays fit in this machine's memory once full, checked before anything is allocated."""
from __future__ import annotations

import numpy as np
import psutil

from rlsup import formatting
from rlsup.algos.envs import probe_env
from rlsup.spec import JobSpec


def replay_bytes(spec: JobSpec) -> int:
    """About what the job's replays hold when full: their big arrays, not the small bookkeeping.

    Storage maps its arrays lazily, so an oversized replay starts fine and is killed for memory hours
    later, once it has filled; this estimate is what lets the worker refuse it at the start.
    """
    observation_shape, observation_dtype, num_actions, stack_size = probe_env(spec.env)
    observation_bytes = int(np.prod(observation_shape)) * np.dtype(observation_dtype).itemsize
    if spec.job.algo == "vtrace":
        steps = spec.vtrace.unroll_length
        # T + 1 observations, then per step an action (int64), a reward, a done flag and the behaviour logits.
        item = (steps + 1) * observation_bytes + steps * (8 + 4 + 1 + 4 * num_actions)
    else:
        # One frame a row (stacks are rebuilt from neighbouring rows), an action, a reward and three flags.
        item = observation_bytes // stack_size + 4 + 4 + 3
    return sum(replay.capacity for replay in spec.replay) * item


def check_replays_fit(spec: JobSpec, available: int | None = None) -> None:
    """Raise MemoryError, naming both numbers, when the full replays would not fit in available memory."""
    needed = replay_bytes(spec)
    available = psutil.virtual_memory().available if available is None else available
    if needed > available:
        capacities = ", ".join(f"{replay.capacity:,}" for replay in spec.replay)
        raise MemoryError(f"the replays need about {formatting.byte_size(needed)} of memory when full "
                          f"([[replay]] capacity {capacities}), but only {formatting.byte_size(available)} is "
                          "available; lower capacity")

