"""Placement: priority then submission order, CPU slots, GPUs per job and jobs per GPU."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

from rlsup.daemon import scheduler
from rlsup.daemon.scheduler import Candidate, GpuHolding, Settings
from rlsup.formatting import GIB


def plan(candidates, *, active_gpu_sets=(), active_cpu=0, gpus=(), cpu_jobs=2, jobs_per_gpu=1, now=100.0,
         gpu_memory=None, total=80 * GIB):
    """Place on GPUs of `total` bytes each; running jobs hold `gpu_memory` (None: unmeasured) per GPU."""
    return scheduler.place(list(candidates), active_gpu_jobs=[GpuHolding(tuple(held), gpu_memory)
                                                              for held in active_gpu_sets],
                           active_cpu_jobs=active_cpu, gpu_indices=tuple(gpus),
                           gpu_memory_totals={index: total for index in gpus},
                           settings=Settings(cpu_jobs=cpu_jobs, jobs_per_gpu=jobs_per_gpu), now=now)


def started(result) -> list[int]:
    return [placement.job_id for placement in result.start]


def test_priority_first_then_submission_order():
    candidates = [Candidate(1, 0), Candidate(2, 5), Candidate(3, 0), Candidate(4, 5)]
    assert [c.job_id for c in scheduler.order(candidates)] == [2, 4, 1, 3]
    assert started(plan(candidates, cpu_jobs=3)) == [2, 4, 1]


def test_cpu_slots_are_capped_and_count_running_jobs():
    result = plan([Candidate(1), Candidate(2), Candidate(3)], active_cpu=1, cpu_jobs=2)
    assert started(result) == [1]
    assert "CPU slot" in result.waiting[2] and "CPU slot" in result.waiting[3]


def test_zero_cpu_slots_hold_the_queue():
    result = plan([Candidate(1)], cpu_jobs=0)
    assert started(result) == [] and 1 in result.waiting


def test_gpu_jobs_get_distinct_free_gpus():
    result = plan([Candidate(1, gpus_wanted=1), Candidate(2, gpus_wanted=1), Candidate(3, gpus_wanted=1)],
                  gpus=(0, 1))
    assert [placement.gpus for placement in result.start] == [(0,), (1,)]
    assert 3 in result.waiting


def test_gpus_in_use_are_not_given_again():
    result = plan([Candidate(5, gpus_wanted=2)], active_gpu_sets=[(1,)], gpus=(0, 1, 2))
    assert result.start[0].gpus == (0, 2)


def test_jobs_per_gpu_lets_jobs_share_the_least_loaded():
    result = plan([Candidate(job, gpus_wanted=1, gpu_memory_bytes=10 * GIB) for job in (1, 2, 3, 4)],
                  active_gpu_sets=[(0,)], gpus=(0, 1), jobs_per_gpu=2, gpu_memory=10 * GIB)
    assert [placement.gpus for placement in result.start] == [(1,), (0,), (1,)]
    assert 4 in result.waiting


def test_gpu_jobs_do_not_use_cpu_slots():
    result = plan([Candidate(1, gpus_wanted=1), Candidate(2)], gpus=(0,), cpu_jobs=1)
    assert started(result) == [1, 2]


def test_a_blocked_gpu_job_keeps_lower_gpu_jobs_waiting_but_not_cpu_jobs():
    candidates = [Candidate(1, priority=9, gpus_wanted=2), Candidate(2, gpus_wanted=1), Candidate(3)]
    result = plan(candidates, active_gpu_sets=[(0,)], gpus=(0, 1))
    assert started(result) == [3]
    assert "behind job 1" in result.waiting[2]


def test_a_job_wanting_more_gpus_than_exist_waits_without_blocking():
    result = plan([Candidate(1, priority=9, gpus_wanted=4), Candidate(2, gpus_wanted=1)], gpus=(0, 1))
    assert started(result) == [2]
    assert "this machine has 2" in result.waiting[1]


def test_restart_backoff_defers_a_job():
    result = plan([Candidate(1, not_before=150.0), Candidate(2)], now=100.0, cpu_jobs=1)
    assert started(result) == [2] and "backoff" in result.waiting[1]
    assert started(plan([Candidate(1, not_before=150.0)], now=151.0)) == [1]


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2, 2), st.integers(0, 3)), max_size=12), st.integers(0, 4),
       st.integers(1, 3), st.integers(0, 3))
def test_placements_never_overfill(requests, gpu_count, jobs_per_gpu, cpu_jobs):
    candidates = [Candidate(index + 1, priority, wanted) for index, (priority, wanted) in enumerate(requests)]
    result = plan(candidates, gpus=range(gpu_count), jobs_per_gpu=jobs_per_gpu, cpu_jobs=cpu_jobs)
    load: dict[int, int] = {}
    by_id = {c.job_id: c for c in candidates}
    for placement in result.start:
        assert len(placement.gpus) == by_id[placement.job_id].gpus_wanted
        assert len(set(placement.gpus)) == len(placement.gpus)
        for index in placement.gpus:
            load[index] = load.get(index, 0) + 1
    assert all(count <= jobs_per_gpu for count in load.values())
    assert sum(1 for p in result.start if not p.gpus) <= cpu_jobs
    assert {p.job_id for p in result.start} | set(result.waiting) == set(by_id)
    # Among CPU-only jobs, whoever waits is not ahead of anyone who started.
    order = [c.job_id for c in scheduler.order(candidates) if c.gpus_wanted == 0]
    began = [job for job in order if job in started(result)]
    assert began == order[:len(began)]


# ---------------------------------------------------------------------------------------------
# daemon.toml


def test_settings_defaults_and_values():
    assert scheduler.settings_from_mapping({}).jobs_per_gpu == 8
    assert scheduler.settings_from_mapping({"gpu_memory_margin_gib": 2}).gpu_memory_margin_gib == 2.0
    parsed = scheduler.settings_from_mapping({"cpu_jobs": 3, "restart_backoff_s": 1})
    assert parsed.cpu_jobs == 3 and parsed.restart_backoff_s == 1.0
    assert scheduler.settings_from_mapping({"daemon": {"jobs_per_gpu": 2}}).jobs_per_gpu == 2
    hooked = scheduler.settings_from_mapping({"on_paused": "notify-send paused", "hook_timeout_s": 5})
    assert (hooked.on_paused, hooked.on_done, hooked.hook_timeout_s) == ("notify-send paused", "", 5.0)
    assert scheduler.Settings().warm_start and not scheduler.settings_from_mapping({"warm_start": False}).warm_start


@pytest.mark.parametrize("data,words", [
    ({"cpu_job": 2}, "unknown setting"),
    ({"cpu_jobs": 1.5}, "integer"),
    ({"cpu_jobs": -1}, "at least 0"),
    ({"tick_s": "fast"}, "number"),
    ({"jobs_per_gpu": True}, "integer"),
    ({"on_done": 5}, "on_done: must be a string"),
    ({"warm_start": 1}, "warm_start: must be true or false"),
    ({"on_finish": "true"}, "on_finish: unknown setting"),
    ({"hook_timeout_s": 0}, "hook_timeout_s: must be at least 0.1"),
    ({"gpu_memory_margin_gib": -0.5}, "gpu_memory_margin_gib: must be at least 0"),
    ({"gpu_memory_margin_gib": "1 GiB"}, "gpu_memory_margin_gib: must be a finite number"),
    ({"gpu_memory_margin_gib": float("nan")}, "gpu_memory_margin_gib: must be a finite number"),
    ({"gpu_memory_margin_gib": float("inf")}, "gpu_memory_margin_gib: must be a finite number"),
])
def test_bad_settings_are_named(data, words):
    with pytest.raises(scheduler.SettingsError, match=words):
        scheduler.settings_from_mapping(data)


@pytest.mark.parametrize("make", [lambda path: path.write_bytes(b"\xff\xfe tick_s = 1\n"), os.mkfifo])
def test_a_daemon_toml_not_utf8_or_a_fifo_is_a_settings_error(tmp_path, make):
    """issue 49 (re-attack of item 2): text that is not UTF-8 raised UnicodeDecodeError past apply_settings,
    which killed the daemon on SIGHUP; a FIFO blocked its loop for ever."""
    from rlsup import paths
    from rlsup.daemon.settings_file import load_settings

    make(tmp_path / paths.DAEMON_SETTINGS)
    with pytest.raises(scheduler.SettingsError, match=str(tmp_path / paths.DAEMON_SETTINGS)):
        load_settings(tmp_path)


# ---------------------------------------------------------------------------------------------
# What placement is told about the machine


def test_fake_gpus_are_given_where_the_machine_is_built():
    from rlsup import hardware

    machine = hardware.Hardware(fake_gpus=3)
    assert machine.gpu_indices() == (0, 1, 2)
    sample = machine.sample()
    assert [gpu.index for gpu in sample.gpus] == [0, 1, 2] and all(gpu.fake for gpu in sample.gpus)
    assert len(sample.cpu_percent) >= 1 and sample.memory_total_bytes > 0
    assert hardware.Sample.from_dict(sample.to_dict()) == sample
    machine.close()


def test_a_machine_without_nvml_has_no_gpus_and_no_error(monkeypatch):
    from rlsup import hardware

    monkeypatch.delenv("RLSUP_FAKE_GPUS", raising=False)
    machine = hardware.Hardware()  # on a GPU-less box NVML fails to initialise: that is no error
    assert isinstance(machine.gpu_indices(), tuple)
    assert len(machine.sample().gpus) == len(machine.gpu_indices())
    machine.close()


def test_the_demo_switch_is_read_by_entry_points_only():
    from rlsup import hardware

    assert hardware.machine_from_environment({}) is None
    assert hardware.fake_gpus({"RLSUP_FAKE_GPUS": " 2 "}) == (2, 16 * GIB)
    assert hardware.fake_gpus({"RLSUP_FAKE_GPUS": "x"}) is None
    machine = hardware.machine_from_environment({"RLSUP_FAKE_GPUS": "2"})
    assert machine.gpu_indices() == (0, 1)
    machine.close()


def test_fake_hardware_is_deterministic():
    from rlsup import hardware

    machine = hardware.FakeHardware(cores=2, gpus=1)
    assert machine.sample() == machine.sample()
    assert machine.gpu_indices() == (0,) and machine.sample().gpus[0].temperature_c == 60.0


def test_a_gpu_shortfall_says_how_to_run_anyway() -> None:
    from rlsup.jobs.gpu_room import gpu_shortfall

    assert gpu_shortfall(1, None, {}).held == (
        "held: needs 1 GPU; this machine has 0: set [job] gpus = 0 to run it on the CPU")
    assert gpu_shortfall(4, None, {0: None, 1: None}).refusal == (
        "needs 4 GPUs and this machine has 2, so it would never start: set [job] gpus = 2 to run it")


def test_a_resumed_job_takes_back_the_slot_of_the_last_job_in_queue_order():
    """Pausing gave its slot to a job behind it: at resume that job, not an earlier one, yields it."""
    running = [Candidate(2), Candidate(3), Candidate(4, priority=5)]
    assert scheduler.slots_to_reclaim([Candidate(1)], running, free=0) == {3: 1}
    # Ahead of it in the queue (higher priority) keeps its slot; a slot already being freed serves it instead.
    assert scheduler.slots_to_reclaim([Candidate(4)], [Candidate(5, priority=1), Candidate(2)], free=0) == {}
    assert scheduler.slots_to_reclaim([Candidate(1)], running, free=1) == {}
    assert scheduler.slots_to_reclaim([Candidate(2, priority=1), Candidate(1)], [Candidate(3), Candidate(4)],
                                      free=0) == {4: 2, 3: 1}
    # cpu_jobs lowered below the jobs running (0 holds the queue): a pause would free nothing to take.
    assert scheduler.slots_to_reclaim([Candidate(1)], running, free=-2) == {}
