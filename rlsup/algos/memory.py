"""Whether a job's replays fit in this machine's memory once full, checked before anything is allocated."""
from __future__ import annotations

import numpy as np
import psutil

from rlsup import formatting
from rlsup.algos.actor_processes import groups_per_actor
from rlsup.algos.envs.training import describe, probe_env
from rlsup.spec import JobSpec


def replay_bytes(spec: JobSpec) -> int:
    """About what the job's replays hold when full, and V-trace's unroll slots: their big arrays, not the
    small bookkeeping.

    Storage maps its arrays lazily, so an oversized replay starts fine and is killed for memory hours
    later, once it has filled; this estimate is what lets the worker refuse it at the start.
    """
    observation_shape, observation_dtype, num_actions, stack_size = probe_env(spec.env)
    observation_bytes = int(np.prod(observation_shape)) * np.dtype(observation_dtype).itemsize
    if spec.job.algo == "vtrace":
        settings = spec.vtrace
        steps = settings.unroll_length
        # T + 1 observations and features, then per step an action (int64), a reward, a done flag and the
        # behaviour logits: what a replay item and an unroll slot each hold.
        item = (steps + 1) * (observation_bytes + 4 * settings.feature_size) + steps * (8 + 4 + 1 + 4 * num_actions)
        # The slots actors write their rounds into: one group per serial learner, groups_per_actor per process.
        groups = 1 if settings.serial else settings.actors * groups_per_actor(settings)
        slots = groups * settings.envs_per_actor
    else:
        # One frame a row (stacks are rebuilt from neighbouring rows), an action (an int32, or a float32 for each
        # entry of a continuous one), a reward and three flags.
        action_bytes = 4 * num_actions if describe(spec.env).actions.continuous else 4
        item = observation_bytes // stack_size + action_bytes + 4 + 3
        slots = 0
    return (sum(replay.capacity for replay in spec.replay) + slots) * item


def check_replays_fit(spec: JobSpec, available: int | None = None) -> None:
    """Raise MemoryError, naming both numbers, when the full replays would not fit in available memory."""
    needed = replay_bytes(spec)
    available = psutil.virtual_memory().available if available is None else available
    if needed > available:
        capacities = ", ".join(f"{replay.capacity:,}" for replay in spec.replay)
        what, lower = "the replays", "capacity"
        if spec.job.algo == "vtrace":
            what, lower = "the replays and the actors' unroll slots", "capacity, envs_per_actor or unroll_length"
        raise MemoryError(f"{what} need about {formatting.byte_size(needed)} of memory when full ([[replay]] "
                          f"capacity {capacities}), but only {formatting.byte_size(available)} is available; "
                          f"lower {lower}")

