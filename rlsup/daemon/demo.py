"""The demo switch RLSUP_FAKE_GPUS, read by entry points only: the daemon's and the CLI's GPU check."""
from __future__ import annotations

import os
from typing import Mapping

from rlsup.hardware import Hardware

FAKE_GPUS_VARIABLE = "RLSUP_FAKE_GPUS"


def fake_gpu_count(environment: Mapping[str, str] = os.environ) -> int | None:
    """RLSUP_FAKE_GPUS=K: pretend there are K GPUs (try placement on a GPU-less machine); None when unset."""
    text = environment.get(FAKE_GPUS_VARIABLE, "").strip()
    if not text:
        return None
    try:
        return max(0, int(text))
    except ValueError:
        return None


def machine_from_environment(environment: Mapping[str, str] = os.environ) -> Hardware | None:
    """A machine with fake GPUs when the switch is set; None leaves the real one to whoever builds it."""
    count = fake_gpu_count(environment)
    return None if count is None else Hardware(fake_gpus=count)
