"""Packing GPU jobs by their memory per GPU, its waiting reasons and labels, and fake GPUs of a given size."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings as hypothesis_settings, strategies as st

from rlsup import hardware
from rlsup.daemon import scheduler
from rlsup.daemon.scheduler import Candidate, GpuHolding, Settings
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Job, Process
from rlsup.views.gpus import job_gpus, packing_lines
from rlsup.formatting import GIB


def plan(candidates, *, totals, holdings=(), cap=8, margin_gib=1.0, now=100.0):
    """Place GPU jobs on GPUs with the given totals ({index: bytes or None}), nothing CPU-bound in the way."""
    return scheduler.place(list(candidates), active_gpu_jobs=list(holdings), active_cpu_jobs=0,
                           gpu_indices=tuple(totals), gpu_memory_totals=dict(totals),
                           settings=Settings(cpu_jobs=4, jobs_per_gpu=cap, gpu_memory_margin_gib=margin_gib), now=now)


def job(job_id, gib, *, gpus=1, priority=0):
    return Candidate(job_id, priority, gpus, gpu_memory_bytes=None if gib is None else int(gib * GIB))


def placed(result) -> dict[int, tuple[int, ...]]:
    return {placement.job_id: placement.gpus for placement in result.start}


def test_jobs_share_a_gpu_while_their_memory_and_the_margin_fit():
    result = plan([job(1, 30), job(2, 30), job(3, 30)], totals={0: 80 * GIB})
    assert placed(result) == {1: (0,), 2: (0,)}
    assert result.waiting[3] == "waiting for 1 GPU with 31 GiB free (most free: 20 of 80 GiB on GPU 0)"


def test_the_margin_is_kept_to_the_byte():
    assert placed(plan([job(1, 39.5), job(2, 39.5)], totals={0: 80 * GIB})) == {1: (0,), 2: (0,)}
    assert placed(plan([job(1, 39.5), job(2, 39.6)], totals={0: 80 * GIB})) == {1: (0,)}
    assert placed(plan([job(1, 40), job(2, 40)], totals={0: 80 * GIB}, margin_gib=0)) == {1: (0,), 2: (0,)}


def test_running_jobs_count_with_their_figures():
    result = plan([job(1, 10)], totals={0: 24 * GIB}, holdings=[GpuHolding((0,), 14 * GIB)])
    assert result.start == () and "most free: 10 of 24 GiB on GPU 0" in result.waiting[1]
    assert placed(plan([job(1, 9)], totals={0: 24 * GIB}, holdings=[GpuHolding((0,), 14 * GIB)])) == {1: (0,)}


def test_a_job_of_unknown_memory_takes_a_whole_gpu():
    result = plan([job(1, None), job(2, 1)], totals={0: 80 * GIB})
    assert placed(result) == {1: (0,)}
    # The GPU is held whole, not short of memory; with the default cap of 8 it is not full by count either.
    assert result.waiting[2] == "waiting for 1 free GPU(s)"
    result = plan([job(1, None)], totals={0: 80 * GIB}, holdings=[GpuHolding((0,), 1 * GIB)])
    assert result.waiting[1] == "waiting for a whole free GPU (its memory is not measured yet)"
    assert plan([job(1, None, gpus=2)], totals={0: 80 * GIB, 1: 80 * GIB},
                holdings=[GpuHolding((1,), GIB)]).waiting[1] == (
        "waiting for 2 whole free GPUs (its memory is not measured yet)")


def test_a_gpu_of_unknown_total_holds_one_job():
    result = plan([job(1, 1), job(2, 1)], totals={0: None})
    assert placed(result) == {1: (0,)} and result.waiting[2] == "waiting for 1 free GPU(s)"


def test_jobs_per_gpu_caps_the_jobs_on_one_gpu():
    result = plan([job(index, 1) for index in (1, 2, 3)], totals={0: 80 * GIB}, cap=2)
    assert placed(result) == {1: (0,), 2: (0,)}
    assert result.waiting[3] == "waiting for 1 free GPU(s) (jobs_per_gpu = 2 reached on 1 of 1)"


def test_the_least_loaded_gpu_is_chosen_fewest_jobs_then_most_free_then_lowest_index():
    holdings = [GpuHolding((0,), 10 * GIB), GpuHolding((1,), 5 * GIB), GpuHolding((2,), 5 * GIB)]
    totals = {0: 80 * GIB, 1: 80 * GIB, 2: 80 * GIB, 3: 24 * GIB}
    assert placed(plan([job(1, 1)], totals=totals, holdings=holdings)) == {1: (3,)}
    assert placed(plan([job(1, 1)], totals=totals, holdings=holdings + [GpuHolding((3,), 1)])) == {1: (1,)}


def test_a_multi_gpu_job_counts_its_figure_on_each_gpu():
    totals = {0: 40 * GIB, 1: 40 * GIB, 2: 40 * GIB}
    result = plan([job(1, 20, gpus=2), job(2, 20, gpus=2)], totals=totals)
    assert placed(result) == {1: (0, 1)}
    assert result.waiting[2] == "waiting for 2 GPUs with 21 GiB free (most free: 20 of 40 GiB on GPU 0)"


def test_a_lone_job_measured_near_the_total_still_gets_an_empty_gpu():
    """Its figure includes its own CUDA context: the margin is kept between jobs sharing a GPU."""
    assert placed(plan([job(1, 79.8)], totals={0: 80 * GIB})) == {1: (0,)}


def test_a_job_larger_than_the_gpus_waits_without_holding_up_others():
    result = plan([job(1, 100, priority=9), job(2, 10)], totals={0: 80 * GIB, 1: 24 * GIB})
    assert placed(result) == {2: (0,)}
    assert result.waiting[1] == ("held: needs 1 GPU with 100 GiB; this machine has none that large (2 GPUs, the "
                                 "largest of 80 GiB): set [job] gpu_memory_gb = 80 or less to run it")
    result = plan([job(1, 30, gpus=2)], totals={0: 80 * GIB, 1: 24 * GIB, 2: None})
    assert placed(result) == {1: (0, 2)}  # an unknown total may be large enough: the job is alone there


def test_a_higher_job_that_does_not_fit_keeps_lower_gpu_jobs_waiting():
    result = plan([job(1, 60, priority=5), job(2, 5)], totals={0: 80 * GIB},
                  holdings=[GpuHolding((0,), 30 * GIB)])
    assert placed(result) == {} and result.waiting[2] == "waiting behind job 1 for GPUs"


def test_gpus_not_offered_are_neither_counted_nor_given():
    result = plan([job(1, 1)], totals={1: 80 * GIB}, holdings=[GpuHolding((0,), None)])
    assert placed(result) == {1: (1,)}


def stored_job(job_id, *, gpus=(0,), measured_gib=None, declared_gib=0.0, state=State.RUNNING):
    measured = None if measured_gib is None else int(measured_gib * GIB)
    return Job(job_id, f"job{job_id}", "", None, "{}", "", "", "", state, Desired.RUNNING, 1, 1, 0, len(gpus), 0, 3,
               0.0, 0, 100, None, "", 0.0, None, None, 0.0, process=Process(tuple(gpus), 10 + job_id),
               gpu_memory_gb=declared_gib, gpu_memory_bytes=measured)


def test_a_job_is_placed_by_the_larger_of_its_measured_and_declared_memory():
    assert stored_job(1, measured_gib=3.0, declared_gib=2.5).gpu_memory_need == 3 * GIB
    assert stored_job(1, measured_gib=3.0, declared_gib=6.0).gpu_memory_need == 6 * GIB
    assert stored_job(1, declared_gib=0.5).gpu_memory_need == GIB // 2
    assert stored_job(1).gpu_memory_need is None


def test_list_shows_each_job_beside_its_gpu_and_each_gpu_packed():
    totals = {0: 80 * GIB, 1: None}
    jobs = [stored_job(1, measured_gib=3.1), stored_job(2, declared_gib=40.5), stored_job(3, gpus=(1,), measured_gib=2),
            stored_job(4, gpus=(0, 1)), stored_job(5, measured_gib=9, state=State.PAUSED)]
    assert [job_gpus(job, totals) for job in jobs[:4]] == ["gpu 0 (3.1/80 GiB)", "gpu 0 (40.5/80 GiB)",
                                                           "gpu 1 (2 GiB)", "gpu 0,1"]
    # A paused job holds nothing; one never measured makes its GPUs whole ones.
    assert packing_lines(jobs, totals) == ["gpu 0: 3 jobs, memory not measured yet (a whole GPU)",
                                           "gpu 1: 2 jobs, memory not measured yet (a whole GPU)"]
    assert packing_lines(jobs[:3], totals) == ["gpu 0: 2 jobs, 43.6/80 GiB", "gpu 1: 1 job, 2 GiB"]


def test_gpu_totals_come_from_the_newest_hardware_sample():
    sample = hardware.FakeHardware(gpus=2, gpu_memory_bytes=24 * GIB).sample()
    assert hardware.gpu_totals(sample.to_dict()) == {0: 24 * GIB, 1: 24 * GIB}
    assert hardware.gpu_totals(None) == {} and hardware.gpu_totals({"gpus": "garbage"}) == {}


# ---------------------------------------------------------------------------------------------
# Properties over random machines and queues

gpu_totals = st.lists(st.one_of(st.none(), st.integers(4, 80).map(lambda gib: gib * GIB)), min_size=0, max_size=4)
requests = st.lists(st.tuples(st.integers(-2, 2), st.integers(0, 3),
                              st.one_of(st.none(), st.integers(1, 180).map(lambda half: half * GIB // 2)),
                              st.booleans()), max_size=10)


def candidates_from(requested, first_id=1):
    return [Candidate(first_id + index, priority, wanted, not_before=200.0 if backoff else 0.0, gpu_memory_bytes=memory)
            for index, (priority, wanted, memory, backoff) in enumerate(requested)]


def holdings_from(result, candidates):
    memory = {candidate.job_id: candidate.gpu_memory_bytes for candidate in candidates}
    return [GpuHolding(placement.gpus, memory[placement.job_id]) for placement in result.start if placement.gpus]


@hypothesis_settings(max_examples=300, deadline=None)
@given(gpu_totals, requests, requests, st.integers(1, 4), st.sampled_from([0.0, 0.5, 1.0, 3.0]))
def test_packing_never_overfills_and_keeps_the_queue_order(sizes, earlier, later, cap, margin_gib):
    totals = dict(enumerate(sizes))
    # A first round fills the GPUs; the second places more beside what the first holds.
    first = candidates_from(earlier)
    holdings = holdings_from(plan(first, totals=totals, cap=cap, margin_gib=margin_gib), first)
    candidates = candidates_from(later, first_id=100)
    result = plan(candidates, totals=totals, holdings=holdings, cap=cap, margin_gib=margin_gib)

    by_id = {candidate.job_id: candidate for candidate in candidates}
    assert {placement.job_id for placement in result.start} | set(result.waiting) == set(by_id)
    for placement in result.start:
        assert len(set(placement.gpus)) == len(placement.gpus) == by_id[placement.job_id].gpus_wanted
        assert set(placement.gpus) <= set(totals)
    on_gpu: dict[int, list[int | None]] = {index: [] for index in totals}
    for holding in holdings + holdings_from(result, candidates):
        for index in holding.gpus:
            on_gpu[index].append(holding.gpu_memory_bytes)
    margin = int(margin_gib * GIB)
    for index, figures in on_gpu.items():
        assert len(figures) <= cap
        if None in figures or totals[index] is None:
            assert len(figures) <= 1  # held whole: unknown memory, or a total nothing can be checked against
        elif len(figures) > 1:
            assert sum(figures) + margin <= totals[index]
        else:
            assert sum(figures) <= totals[index]
    # The first GPU job that could run here but waits keeps its GPUs: the jobs behind it that start (backfill) take
    # none of them (issue 50 item 6), and those that do not start wait behind it.
    queue = [candidate for candidate in scheduler.order(candidates)
             if candidate.gpus_wanted and candidate.not_before <= 100.0
             and not result.waiting.get(candidate.job_id, "").startswith("held: ")]
    first = next((index for index, candidate in enumerate(queue) if candidate.job_id in result.waiting), None)
    if first is not None:
        ahead = {candidate.job_id for candidate in queue[:first]}
        placed_ahead = [GpuHolding(placement.gpus, by_id[placement.job_id].gpu_memory_bytes)
                        for placement in result.start if placement.job_id in ahead]
        packing = scheduler.Packing(holdings + placed_ahead, gpu_indices=tuple(totals), totals=totals, cap=cap,
                                    margin_bytes=margin)
        kept = packing.keep(queue[first].gpu_memory_bytes, queue[first].gpus_wanted)
        assert len(kept) == queue[first].gpus_wanted
        for candidate in queue[first + 1:]:
            gpus = next((placement.gpus for placement in result.start if placement.job_id == candidate.job_id), None)
            if gpus is None:
                assert result.waiting[candidate.job_id] == f"waiting behind job {queue[first].job_id} for GPUs"
            else:
                assert not set(gpus) & kept


@hypothesis_settings(max_examples=100, deadline=None)
@given(gpu_totals, requests, requests, st.integers(1, 4), st.randoms(use_true_random=False))
def test_placement_is_deterministic(sizes, earlier, later, cap, shuffler):
    totals = dict(enumerate(sizes))
    holdings = holdings_from(plan(candidates_from(earlier), totals=totals, cap=cap), candidates_from(earlier))
    candidates = candidates_from(later, first_id=100)
    result = plan(candidates, totals=totals, holdings=holdings, cap=cap)
    assert plan(candidates, totals=totals, holdings=holdings, cap=cap) == result
    shuffled = list(candidates)
    shuffler.shuffle(shuffled)
    assert plan(shuffled, totals=totals, holdings=holdings, cap=cap) == result


# ---------------------------------------------------------------------------------------------
# Fake GPUs of a given size, and each GPU's total memory


@pytest.mark.parametrize("text,expected", [
    ("2", (2, 16 * GIB)),
    (" 3 ", (3, 16 * GIB)),
    ("0", (0, 16 * GIB)),
    ("2x80GiB", (2, 80 * GIB)),
    ("1x24gib", (1, 24 * GIB)),
    ("4x40.5GiB", (4, int(40.5 * GIB))),
    (" 2 X 8 GIB ", (2, 8 * GIB)),
])
def test_fake_gpus_take_a_count_and_a_size(text, expected):
    assert hardware.fake_gpus({"RLSUP_FAKE_GPUS": text}) == expected


@pytest.mark.parametrize("text", [
    "", "x", "2x", "x80GiB", "2x80GB", "2x80", "2x80MiB", "-1x8GiB", "-1", "2x-8GiB", "2x0GiB", "2x0.0000000001GiB", "2x1e400GiB",
    "2x" + "9" * 400 + "GiB", "2x8.GiB", "2x.5GiB", "2x80GiBs", "2x80GiB,1x8GiB",
    "\u0662x8GiB", "2x\u0668GiB", "\u0662", "\uff12x80GiB", "2\u00d780GiB",
])
def test_garbage_fake_gpus_are_none(text):
    assert hardware.fake_gpus({"RLSUP_FAKE_GPUS": text}) is None
    assert hardware.machine_from_environment({"RLSUP_FAKE_GPUS": text}) is None


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.text(max_size=20))
def test_any_fake_gpus_text_parses_or_is_none(text):
    asked = hardware.fake_gpus({"RLSUP_FAKE_GPUS": text})
    assert asked is None or (asked.count >= 0 and asked.memory_bytes > 0)


def test_the_switch_sizes_the_fake_gpus():
    machine = hardware.machine_from_environment({"RLSUP_FAKE_GPUS": "2x80GiB"})
    assert machine.gpu_memory_totals() == {0: 80 * GIB, 1: 80 * GIB}
    assert [gpu.memory_total_bytes for gpu in machine.sample().gpus] == [80 * GIB] * 2
    machine.close()
    plain = hardware.Hardware(fake_gpus=1)
    assert plain.gpu_memory_totals() == {0: 16 * GIB} and plain.sample().gpus[0].memory_total_bytes == 16 * GIB
    plain.close()


def test_fake_hardware_reports_its_gpu_memory():
    assert hardware.FakeHardware(gpus=2).gpu_memory_totals() == {0: 16 * GIB, 1: 16 * GIB}
    machine = hardware.FakeHardware(gpus=1, gpu_memory_bytes=24 * GIB)
    assert machine.gpu_memory_totals() == {0: 24 * GIB}
    assert machine.sample().gpus[0].memory_total_bytes == 24 * GIB
    assert hardware.FakeHardware().gpu_memory_totals() == {}


def test_a_machine_without_nvml_reports_no_totals(monkeypatch):
    monkeypatch.delenv("RLSUP_FAKE_GPUS", raising=False)
    machine = hardware.Hardware()
    assert set(machine.gpu_memory_totals()) == set(machine.gpu_indices())
    machine.close()
