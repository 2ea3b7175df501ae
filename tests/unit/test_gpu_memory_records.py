"""A worker's GPU memory in status.json, exit.json's held pause and a checkpoint's record, read back as a
stranger may have written them: what does not fit is absent, never an error."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlsup import paths
from rlsup.checkpoint.trajectory import Trajectory
from rlsup.formatting import GIB
from rlsup.run.exit import EXIT_PAUSED, ExitRecord, read_exit, write_exit
from rlsup.hardware import GpuMemory
from rlsup.run.status import Phase, WorkerStatus, read_worker_status, write_worker_status


def test_status_carries_both_counts_and_places_by_the_larger(tmp_path: Path) -> None:
    memory = GpuMemory(reserved_peak_bytes=3 * GIB, process_bytes=3 * GIB + (500 << 20))
    write_worker_status(tmp_path, WorkerStatus(phase=Phase.RUNNING, gpu_memory=memory))
    read = read_worker_status(tmp_path)
    assert read.gpu_memory == memory and read.gpu_memory.figure == 3 * GIB + (500 << 20)
    assert GpuMemory(2 * GIB, None).figure == 2 * GIB and GpuMemory(None, None).figure is None


@pytest.mark.parametrize("written", [None, "3 GiB", [1], {}, {"reserved_peak_bytes": -1},
                                     {"reserved_peak_bytes": 1e300}, {"reserved_peak_bytes": True},
                                     {"reserved_peak_bytes": "3", "process_bytes": float("nan")}])
def test_a_gpu_memory_that_does_not_fit_is_absent(tmp_path: Path, written) -> None:
    (tmp_path / paths.STATUS_FILE).write_text(json.dumps({"phase": "running", "gpu_memory": written}))
    assert read_worker_status(tmp_path).gpu_memory is None


def test_a_held_pause_round_trips_and_only_true_holds(tmp_path: Path) -> None:
    write_exit(tmp_path, ExitRecord(code=EXIT_PAUSED, reason="CUDA out of memory", step=5, held=True))
    assert read_exit(tmp_path).held
    for written in ("yes", 1, None):
        (tmp_path / paths.EXIT_FILE).write_text(json.dumps({"code": 75, "held": written}))
        assert not read_exit(tmp_path).held


def test_a_checkpoint_records_gpu_memory_only_on_a_gpu() -> None:
    on_cpu = Trajectory(algo="dqn").to_extra()
    assert "gpu_memory" not in on_cpu and Trajectory.from_extra(on_cpu).gpu_memory is None
    on_gpu = Trajectory(algo="dqn", gpu_memory=GpuMemory(4 * GIB, None)).to_extra()
    assert on_gpu["gpu_memory"] == {"reserved_peak_bytes": 4 * GIB, "process_bytes": None}
    assert Trajectory.from_extra(on_gpu).gpu_memory.figure == 4 * GIB
    assert Trajectory.from_extra({"gpu_memory": {"process_bytes": "lots"}}).gpu_memory is None


@pytest.mark.parametrize("visible, local, named", [("3,1", 1, "GPU 1"), ("3,1", 0, "GPU 3"), (" 2 ", 0, "GPU 2"),
                                                   (None, 1, "GPU 1"), ("GPU-5f2c", 0, "GPU 0")])
def test_an_out_of_memory_names_the_gpu_as_the_machine_numbers_it(monkeypatch, visible, local, named) -> None:
    import torch

    from rlsup.worker.gpu_memory import gpu_name

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert gpu_name(torch.device("cuda", local)) == named


def test_nvml_counts_a_process_per_gpu_not_summed_over_its_gpus() -> None:
    """issue 49 item 8: a figure is per GPU, and the daemon now refuses one larger than the job's GPU, so a 2-GPU
    worker's NVML count must be the most it holds on one GPU, not the sum. NVML itself is stood in for here."""
    from types import SimpleNamespace

    from rlsup.hardware import _Nvml

    listed = {0: [SimpleNamespace(pid=7, usedGpuMemory=50 * GIB), SimpleNamespace(pid=8, usedGpuMemory=70 * GIB)],
              1: [SimpleNamespace(pid=7, usedGpuMemory=60 * GIB)], 2: []}
    module = SimpleNamespace(nvmlDeviceGetCount=lambda: 3, nvmlDeviceGetHandleByIndex=lambda index: ("gpu", index),
                             nvmlDeviceGetComputeRunningProcesses=lambda handle: listed[handle[1]])
    nvml = _Nvml(module)
    assert (nvml.process_memory(7), nvml.process_memory(8), nvml.process_memory(9)) == (60 * GIB, 70 * GIB, None)
