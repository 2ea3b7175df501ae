"""A vector's envs made one by one, refused once the rest would not fit in memory: 2**20 Atari envs need a TiB."""
from __future__ import annotations

import psutil

from rlsup import formatting
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.training import TrainingEnv, make_env
from rlsup.spec import EnvSection

# Memory is looked at after every this many envs (a look costs ~50 us; an Atari env takes ~140 ms to make).
LOOK_EVERY = 16
# What one env takes is measured over windows of at least this much growth: below it, the allocator's steps
# (a new arena, a run of pages) would dominate. The first window is not used, as it holds what the first env
# of a process sets up once (a ROM, a module's tables).
WINDOW_BYTES = 64 * 2**20


class EnvMemory:
    """The growth of this process's resident memory as envs are made, and the refusal it may call for."""

    def __init__(self, settings: EnvSection, count: int, total: int) -> None:
        self.settings = settings
        self.count, self.total = count, total
        self.process = psutil.Process()
        self.window_start = (self.process.memory_info().rss, 0)
        self.windows = 0

    def look(self, made: int) -> None:
        """Raise EnvError when the envs still to make would need more memory than the machine has available."""
        resident = self.process.memory_info().rss
        start_resident, start_made = self.window_start
        if resident - start_resident < WINDOW_BYTES or made == start_made:
            return
        each = (resident - start_resident) / (made - start_made)
        self.window_start, self.windows = (resident, made), self.windows + 1
        available = psutil.virtual_memory().available
        # The slices of a vector are made at once, in as many processes: all are as far along as this one.
        if self.windows > 1 and each * self.total * (1 - made / self.count) > available:
            raise EnvError(f"making {self.total:,} {self.settings.id} envs would need about "
                           f"{formatting.byte_size(each * self.total)} of memory ({formatting.byte_size(each)} "
                           f"each, measured over {made:,}), but only {formatting.byte_size(available)} is "
                           f"available; lower [env] num_envs (or [vtrace] envs_per_actor)")


def make_envs(settings: EnvSection, seeds: list[int], total: int | None = None) -> list[TrainingEnv]:
    """One env per seed; EnvError, with those made closed, as soon as the rest would not fit in memory.
    total: the envs of the whole vector, where these are one slice of it (made at once in other processes)."""
    memory = EnvMemory(settings, len(seeds), total or len(seeds))
    envs: list[TrainingEnv] = []
    try:
        for seed in seeds:
            envs.append(make_env(settings, seed=seed))
            if len(envs) % LOOK_EVERY == 0:
                memory.look(len(envs))
    except BaseException:
        for env in envs:
            env.close()
        raise
    return envs
