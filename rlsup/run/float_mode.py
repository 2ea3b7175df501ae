"""A run's CPU float mode ([job] flush_denormals): set by its worker, and handed down to every process of the run."""
from __future__ import annotations

import os

# The CPU keeps the mode per thread, and a spawned or exec'd process starts without it: the environment carries
# it to each child of a run (learner, actor, env process), which applies it at its start. A new thread takes
# the mode of the thread that makes it, once: torch's intra-op threads are made at its first parallel kernel,
# so the mode is set before any (configure_torch is a worker's first touch of torch) and not switched after.
VARIABLE = "RLSUP_FLUSH_DENORMALS"


def set_flush_denormals(flush: bool) -> bool:
    """Subnormal floats read and written as zero (x86-64's DAZ and FTZ) in this thread, and in the threads and
    processes of the run it starts later; False, changing nothing, where this CPU cannot flush them."""
    import torch  # only here: an env process that needs no torch imports it only to flush

    if not torch.set_flush_denormal(flush) and flush:
        return False
    os.environ[VARIABLE] = "1" if flush else "0"
    return True


def inherit_flush_denormals() -> None:
    """In a child process or thread of a run: the mode its worker chose."""
    if os.environ.get(VARIABLE) == "1":
        set_flush_denormals(True)
