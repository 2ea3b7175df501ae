"""A worker that cannot give a job what it asked for trains on, and says so as an event `rlsup status` shows."""
from __future__ import annotations

import pytest

from rlsup.jobs.state import State


def test_a_reserved_gpu_torch_cannot_see_is_an_event(harness):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here: a job given one uses it")
    # The daemon reserves a (pretended) GPU; torch, without CUDA here, trains on the CPU.
    harness.extra_environment["RLSUP_FAKE_GPUS"] = "1"
    harness.start_daemon()
    job = harness.submit(harness.job_file("gpu", gpus=1, total_steps=400_000))
    events = harness.wait_for(lambda: harness.events(job.id, "feature off"), timeout=120,
                              what="the switched-off GPU as an event", report=lambda: harness.report(job.id))
    assert "[job] gpus = 1 but torch sees no GPU (CUDA_VISIBLE_DEVICES='0'): training on the CPU" == \
        events[0].message
    harness.wait_state(job.id, State.RUNNING)  # training goes on, on the CPU
    code, out, _ = harness.cli("status", str(job.id))
    assert code == 0 and "feature off" in out and "torch sees no GPU" in out, out
