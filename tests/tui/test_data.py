"""Unit tests of the TUI's data side: downsampling, the incremental metrics reader, job rows and the poller."""
from __future__ import annotations

import json
import time
import random
from pathlib import Path

import pytest

from rlsup import paths
from rlsup.client import DaemonStatus
from rlsup.hardware import FakeHardware
from rlsup.jobs.state import State
from rlsup.run.status import WorkerStatus
from rlsup.views.jobs import merge_status, sorted_rows
from rlsup.jobs.store import Process, Store
from rlsup.tui import messages
from rlsup.tui.data import MetricsPoller, Poller
from rlsup.tui.metrics import JobMetrics
from rlsup.tui.downsampling import Downsampler


# -- downsampling -------------------------------------------------------------------------------


def test_a_short_series_is_kept_exactly():
    series = Downsampler(capacity=8)
    for step in range(8):
        series.add(step, step * step)
    assert series.envelope() == (tuple(range(8)), tuple(step * step for step in range(8)))
    assert series.means() == (tuple(range(8)), tuple(step * step for step in range(8)))


def test_a_long_series_stays_within_capacity_and_keeps_its_extremes():
    generator = random.Random(1)
    series = Downsampler(capacity=200)
    values = [generator.gauss(0, 1) for _ in range(300_000)]
    for step, value in enumerate(values):
        series.add(step, value)
    xs, ys = series.envelope()
    assert len(series.buckets) <= 200 and len(xs) <= 400
    assert min(ys) == min(values) and max(ys) == max(values)
    assert list(xs) == sorted(xs)
    assert sum(bucket.count for bucket in series.buckets) == series.count == len(values)
    # The buckets' means, weighted by their counts, are the series' mean.
    means = series.means()[1]
    weighted = sum(mean * bucket.count for mean, bucket in zip(means, series.buckets)) / len(values)
    assert weighted == pytest.approx(sum(values) / len(values), abs=1e-9)


def test_a_single_spike_survives_any_amount_of_downsampling():
    series = Downsampler(capacity=16)
    for step in range(100_000):
        series.add(step, 1000.0 if step == 54_321 else 0.0)
    xs, ys = series.envelope()
    assert (54_321, 1000.0) in zip(xs, ys)


def test_non_finite_values_are_skipped_and_capacity_must_be_even():
    series = Downsampler(capacity=4)
    series.add(1, float("nan"))
    series.add(2, float("inf"))
    assert series.count == 0 and series.envelope() == ((), ())
    with pytest.raises(ValueError):
        Downsampler(capacity=5)


# -- the incremental metrics reader -------------------------------------------------------------


def record_line(kind: str, step: int, **values) -> str:
    return json.dumps({"t": 0.0, "kind": kind, "step": step, **values}) + "\n"


def append(run_dir: Path, text: str) -> None:
    with open(run_dir / paths.METRICS_FILE, "a") as handle:
        handle.write(text)


def test_metrics_are_read_from_the_last_offset_whole_lines_only(tmp_path):
    metrics = JobMetrics(tmp_path)
    assert metrics.update() is False  # no file yet
    append(tmp_path, record_line("episode", 10, **{"return": 5.0}) + record_line("train", 250, loss=0.5,
                                                                                  steps_per_second=900.0))
    assert metrics.update() is True
    view = metrics.view()
    assert (view.records, view.last_step) == (2, 250)
    assert view.episode_return == ((10.0,), (5.0,)) and view.loss == ((250.0,), (0.5,))
    assert metrics.update() is False
    # Half a line waits for its end.
    line = record_line("episode", 300, **{"return": 7.0})
    append(tmp_path, line[:15])
    assert metrics.update() is False
    append(tmp_path, line[15:])
    assert metrics.update() is True and metrics.view().episode_return[1] == (5.0, 7.0)


def test_an_update_reads_only_what_was_appended(tmp_path):
    append(tmp_path, record_line("episode", 10, **{"return": 5.0}))
    metrics = JobMetrics(tmp_path)
    metrics.update()
    # Blank the old line (same length): a reader starting from the top would now find nothing there.
    path = tmp_path / paths.METRICS_FILE
    path.write_text(" " * (path.stat().st_size - 1) + "\n")
    append(tmp_path, record_line("episode", 20, **{"return": 9.0}))
    metrics.update()
    assert metrics.view().episode_return == ((10.0, 20.0), (5.0, 9.0))


def test_a_file_cut_back_on_resume_is_dropped_and_read_again(tmp_path):
    kept = record_line("episode", 10, **{"return": 5.0})
    append(tmp_path, kept + record_line("episode", 20, **{"return": 6.0})
           + record_line("episode", 30, **{"return": 7.0}))
    metrics = JobMetrics(tmp_path)
    metrics.update()
    (tmp_path / paths.METRICS_FILE).write_text(kept)  # the resume truncated to its checkpoint's length
    assert metrics.update() is True
    assert metrics.view().episode_return == ((10.0,), (5.0,)) and metrics.view().records == 1


def test_vtrace_loss_and_records_without_a_step():
    metrics = JobMetrics(Path("/nonexistent"))
    metrics._add({"kind": "train", "step": 100, "total_loss": 2.5, "steps_per_second": 10.0})
    metrics._add({"kind": "episode", "return": 3.0})  # an actor's episode, placed at the last step seen
    view = metrics.view()
    assert view.loss_name == "total_loss" and view.loss == ((100.0,), (2.5,))
    assert view.episode_return == ((100.0,), (3.0,))


# -- job rows and the poller --------------------------------------------------------------------


def submit(store: Store, home: Path, name: str, **options):
    return store.submit(name=name, spec_path=home / f"{name}.toml", run_dir=home / "runs" / name,
                        algo="dqn", env="CartPole-v1", total_steps=options.pop("total_steps", 1000), **options)


def test_rows_take_speed_and_eta_from_the_live_worker_only(rlsup_home):
    with Store(rlsup_home) as store:
        job = submit(store, rlsup_home, "a")
        job = store.transition(job.id, State.STARTING, "started", process=Process(pid=41))
    status = {"pid": 41, "step": 400, "steps_per_second": 100.0, "mean_return": 12.5}
    row = merge_status(job, WorkerStatus.from_json(status), rate=100.0)  # the smoothed rate, not the status' instantaneous one
    assert (row.step, row.steps_per_second, row.eta_s, row.mean_return) == (400, 100.0, 6.0, 12.5)
    assert merge_status(job, WorkerStatus.from_json(status)).eta_s is None  # no smoothed rate yet: "–", not a guess
    stale = merge_status(job, WorkerStatus.from_json({**status, "pid": 40}), rate=100.0)  # a previous worker's file
    assert (stale.step, stale.steps_per_second, stale.eta_s) == (0, None, None)


def test_rows_sort_by_state_then_priority_then_id(rlsup_home):
    with Store(rlsup_home) as store:
        low, high, running = (submit(store, rlsup_home, name, priority=priority)
                              for name, priority in (("low", 0), ("high", 5), ("run", 0)))
        running = store.transition(running.id, State.STARTING, "started")
        rows = sorted_rows([merge_status(job, None) for job in store.jobs()])
    assert [row.job.name for row in rows] == ["run", "high", "low"]


def test_the_poller_posts_only_what_changed(rlsup_home):
    with Store(rlsup_home) as store:
        job = submit(store, rlsup_home, "a")
    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True)
    append(run_dir, record_line("episode", 10, **{"return": 5.0}))
    (run_dir / paths.LOG_FILE).write_text("hello\n")
    poller = Poller(rlsup_home, FakeHardware(gpus=1), daemon_status=lambda home: DaemonStatus(False, None, home),
                    hardware_every_s=3600)
    try:
        first = {type(message) for message in poller.poll()}
        assert first == {messages.DaemonChanged, messages.JobsRefreshed, messages.HardwareSampled}
        poller.select(job.id)
        second = {type(message) for message in poller.poll()}
        assert second == {messages.JobEventsLoaded, messages.CheckpointsListed, messages.LogTail}
        assert poller.poll() == []
        append(run_dir, record_line("episode", 20, **{"return": 6.0}))
        with Store(rlsup_home) as store:
            store.add_event(job.id, "edit", "applied: log.every_steps 1 -> 2")
        third = poller.poll()
        assert {type(message) for message in third} == {messages.EventsAppended}
        # Away and back between two polls: the UI emptied the panes, so everything comes again.
        poller.select(None)
        poller.select(job.id)
        again = {type(message) for message in poller.poll()}
        assert again == {messages.JobEventsLoaded, messages.CheckpointsListed, messages.LogTail}
    finally:
        poller.close()


def test_the_metrics_poller_posts_new_points_and_every_fresh_selection(tmp_path):
    poller = MetricsPoller()
    assert poller.poll() == []
    poller.select(3, str(tmp_path))
    [first] = poller.poll()
    assert isinstance(first, messages.MetricsUpdated) and first.view.records == 0
    assert poller.poll() == []
    append(tmp_path, record_line("episode", 20, **{"return": 6.0}))
    [second] = poller.poll()
    assert second.view.episode_return == ((20.0,), (6.0,))
    poller.select(3, str(tmp_path))
    [third] = poller.poll()
    assert third.view == second.view  # the same series, kept in memory, not read again


def test_the_metrics_poller_reposts_when_a_compared_job_grows_or_the_smoothing_changes(tmp_path):
    from rlsup.views import plots as plotting
    from rlsup.tui.overlay import Curve
    selected, other = tmp_path / "selected", tmp_path / "other"
    for run_dir, value in ((selected, 1.0), (other, 10.0)):
        run_dir.mkdir()
        append(run_dir, record_line("episode", 10, **{"return": value}))
    poller = MetricsPoller()
    poller.select(1, str(selected))
    poller.compare((Curve("2", "2 other", ((2, str(other)),)), Curve("1", "1 selected", ((1, str(selected)),))))
    [first] = poller.poll()
    assert first.view.compared_lines("return") == (plotting.Series("2 other", (10.0,), (10.0,)),
                                                   plotting.Series("1 selected", (10.0,), (1.0,)))
    assert poller.poll() == []
    append(other, record_line("episode", 30, **{"return": 20.0}))
    [second] = poller.poll()  # only the compared job changed
    # Debiased EMA at 0.9 of 10 then 20: 0.1 * 10 = 1 (over 0.1: 10), then (0.9 * 1 + 0.1 * 20) / (1 - 0.81).
    assert second.view.compared_lines("return")[0] == plotting.Series("2 other", (10.0, 30.0),
                                                                      (10.0, pytest.approx(2.9 / 0.19)))
    poller.smooth(0.0)
    [third] = poller.poll()
    assert third.view.compared_lines("return")[0].values == (10.0, 20.0) and third.view.smoothed_return == ((), ())
    poller.compare(())
    [fourth] = poller.poll()
    assert fourth.view.compared == ()


def test_a_job_selected_while_the_metrics_poller_reads_is_plotted_by_the_next_poll(tmp_path, monkeypatch):
    """The UI thread selects as the cursor moves, whenever that is: a poll finishes with the request it began
    with. It used to look the new job up among the metrics read for the old one: KeyError, the poller dead."""
    first, second = tmp_path / "first", tmp_path / "second"
    for run_dir in (first, second):
        run_dir.mkdir()
        append(run_dir, record_line("episode", 10, **{"return": 1.0}))
    poller = MetricsPoller()
    poller.select(1, str(first))
    update = JobMetrics.update

    def update_as_the_cursor_moves(metrics):
        poller.select(2, str(second))
        return update(metrics)

    monkeypatch.setattr(JobMetrics, "update", update_as_the_cursor_moves)
    [message] = poller.poll()
    assert message.job_id == 1
    monkeypatch.setattr(JobMetrics, "update", update)
    [message] = poller.poll()
    assert message.job_id == 2


def test_the_rate_says_nothing_until_ten_seconds_then_averages_the_last_minute():
    from rlsup.tui.rows import smoothed_rate
    assert smoothed_rate([]) is None
    assert smoothed_rate([(0.0, 0), (5.0, 5_000)]) is None          # 5 s: too early to say
    # 15,000 steps/s of warm-up long ago, then 100 steps/s: only the last minute counts.
    samples = [(0.0, 0), (10.0, 150_000)] + [(10.0 + t, 150_000 + 100 * t) for t in range(1, 121)]
    assert smoothed_rate(samples) == pytest.approx(100.0)
    # A jittery instantaneous rate does not move it: 100 steps/s on average whatever each second did.
    jitter = [(float(t), 100 * t + (30 if t % 2 else -30)) for t in range(61)]
    assert smoothed_rate(jitter) == pytest.approx(100.0, rel=0.02)


def test_the_rate_starts_over_where_a_resume_took_the_step_back():
    from rlsup.tui.rows import smoothed_rate
    before = [(float(t), 50 * t) for t in range(0, 60)]
    after = [(100.0 + t, 1_000 + 200 * t) for t in range(0, 20)]     # resumed from the step-1,000 checkpoint
    assert smoothed_rate(before + after) == pytest.approx(200.0)
    assert smoothed_rate(before + after[:3]) is None


def test_the_speed_plot_is_scaled_to_the_training_phase():
    from rlsup.tui.rows import training_phase_speeds
    warm_up = [15_000.0] * 10
    training = [300.0 + (index % 7) for index in range(90)]
    clipped = training_phase_speeds(warm_up + training)
    assert len(clipped) == 100 and max(clipped) <= 3 * 303 and clipped[10:] == tuple(training)
    assert training_phase_speeds([]) == ()


def test_rows_take_a_smoothed_speed_from_the_metrics_after_a_restart(rlsup_home):
    # A TUI started late, or a worker just restarted, still has the train records' t/step to go on.
    with Store(rlsup_home) as store:
        job = submit(store, rlsup_home, "a")
        job = store.transition(job.id, State.STARTING, "started", process=Process(pid=41))
    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    now = time.time()
    with (run_dir / "metrics.jsonl").open("w") as file:
        for second in range(30):
            file.write(json.dumps({"t": now - 30 + second, "step": 1_000 + 50 * second, "kind": "train"}) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"pid": 41, "step": 2_500, "time": now,
                                                     "steps_per_second": 9_999.0}))
    poller = Poller(rlsup_home, hardware=FakeHardware(), daemon_status=lambda home: DaemonStatus(True, 1, home))
    rows = next(message.rows for message in poller.poll() if isinstance(message, messages.JobsRefreshed))
    poller.close()
    assert rows[0].steps_per_second == pytest.approx(50.0, rel=0.05)


def test_a_store_that_is_garbage_or_lost_is_a_failed_poll_with_its_sentence(rlsup_home):
    poller = Poller(rlsup_home, FakeHardware(gpus=1), daemon_status=lambda home: DaemonStatus(False, None, home),
                    hardware_every_s=3600)
    database = rlsup_home / paths.DATABASE
    try:
        database.write_bytes(b"not a database\n" * 300)
        (failed,) = poller.poll()
        assert isinstance(failed, messages.PollFailed) and "not an rlsup store" in failed.error
        database.unlink()
        (rlsup_home / (paths.DATABASE + ".made")).touch()  # a store was made here, and is lost
        (failed,) = poller.poll()
        assert isinstance(failed, messages.PollFailed) and "restore it" in failed.error
    finally:
        poller.close()
