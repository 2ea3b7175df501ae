"""rlsup.views.plots against numbers worked out by hand: reading records, the debiased EMA, and group aggregates."""
from __future__ import annotations

import json
import re

import pytest

from rlsup import paths
from rlsup.views.plots import (GroupSeries, Series, UnknownMetric, aggregate, available_metrics, common_grid,
                               interpolate, line_of, next_smoothing, plot_ticks, read_series, series_of, smooth)

RECORDS = [
    {"t": 1.0, "kind": "episode", "step": 10, "return": 5.0, "length": 10},
    {"t": 1.1, "kind": "train", "step": 20, "loss": 0.5, "steps_per_second": 100.0, "epsilon": 0.9},
    {"t": 1.2, "kind": "episode", "step": 30, "return": 7.0, "length": 20},
    {"t": 1.3, "kind": "eval", "step": 30, "mean": 9.5, "returns": [9.0, 10.0]},
    {"t": 1.4, "kind": "checkpoint", "step": 30, "reason": "interval"},
    {"t": 1.5, "kind": "episode", "step": 45, "return": float("nan"), "length": 15},  # NaN: dropped
]


def test_series_of_reads_each_metric_from_its_record_kind():
    assert series_of(RECORDS, "return", "a") == Series("a", (10.0, 30.0), (5.0, 7.0))
    assert series_of(RECORDS, "length", "a") == Series("a", (10.0, 30.0, 45.0), (10.0, 20.0, 15.0))
    assert series_of(RECORDS, "eval_return", "a") == Series("a", (30.0,), (9.5,))
    assert series_of(RECORDS, "loss", "a") == Series("a", (20.0,), (0.5,))  # DQN's loss, found by name
    assert series_of(RECORDS, "epsilon", "a") == Series("a", (20.0,), (0.9,))


def test_available_metrics_names_what_the_records_carry():
    assert available_metrics(RECORDS) == {"return", "length", "eval_return", "loss", "steps_per_second", "epsilon"}


def test_read_series_refuses_a_metric_no_record_carries(tmp_path):
    (tmp_path / paths.METRICS_FILE).write_text("".join(json.dumps(record) + "\n" for record in RECORDS))
    assert read_series(tmp_path, "return", "run").values == (5.0, 7.0)
    with pytest.raises(UnknownMetric, match="'retrun'.*eval_return, length, loss, return"):
        read_series(tmp_path, "retrun", "run")
    assert read_series(tmp_path / "missing", "retrun", "run").steps == ()  # no records yet: nothing to refuse


def test_smoothing_is_a_debiased_exponential_moving_average():
    # Weight 0.5: EMA 0.5*0 + 0.5*2 = 1, debiased by 1 - 0.5 = 2; then 0.5*1 + 0.5*4 = 2.5, debiased by
    # 1 - 0.25: 10/3; then 0.5*2.5 + 0.5*0 = 1.25 over 1 - 0.125: 10/7.
    smoothed = smooth(Series("a", (1.0, 2.0, 3.0), (2.0, 4.0, 0.0)), 0.5)
    assert smoothed.steps == (1.0, 2.0, 3.0)
    assert smoothed.values == pytest.approx((2.0, 10 / 3, 10 / 7))
    assert smooth(smoothed, 0.0) is smoothed  # 0 is off


def test_the_smoothing_key_cycles_back_to_off():
    assert [next_smoothing(weight) for weight in (0.0, 0.6, 0.9, 0.99, 0.5)] == [0.6, 0.9, 0.99, 0.0, 0.0]


def test_interpolate_between_and_on_points():
    series = Series("a", (0.0, 10.0, 20.0), (0.0, 10.0, 40.0))
    assert [interpolate(series, step) for step in (0.0, 5.0, 10.0, 15.0, 20.0)] == [0.0, 5.0, 10.0, 25.0, 40.0]


def test_a_group_covers_only_the_steps_every_run_has_reached():
    ahead = Series("a", (0.0, 10.0, 20.0), (0.0, 10.0, 20.0))
    behind = Series("b", (0.0, 20.0, 40.0), (10.0, 10.0, 10.0))
    late_start = Series("c", (5.0, 40.0), (1.0, 1.0))
    assert common_grid([ahead, behind], 3) == (0.0, 10.0, 20.0)
    assert common_grid([ahead, late_start], 4) == (5.0, 10.0, 15.0, 20.0)
    assert common_grid([ahead, Series("d", (30.0,), (1.0,))]) == ()  # no step in common
    assert common_grid([ahead, Series("e", (), ())]) == ()


def test_aggregate_mean_band_and_std_by_hand():
    ahead = Series("a", (0.0, 10.0, 20.0), (0.0, 10.0, 20.0))
    behind = Series("b", (0.0, 20.0, 40.0), (10.0, 10.0, 10.0))
    # On steps 0, 10, 20: a is 0, 10, 20 and b 10, 10, 10.
    assert aggregate([ahead, behind], "ab", 3) == GroupSeries(
        label="ab", steps=(0.0, 10.0, 20.0), mean=(5.0, 10.0, 15.0), low=(0.0, 10.0, 10.0), high=(10.0, 10.0, 20.0),
        std=(5.0, 0.0, 5.0), runs=2)


def test_one_run_is_its_own_line_and_several_a_group():
    run = Series("a", (0.0, 1.0), (3.0, 4.0))
    assert line_of([run], "job 1") == Series("job 1", (0.0, 1.0), (3.0, 4.0))
    group = line_of([run, run], "seeds", 2)
    assert isinstance(group, GroupSeries) and group.mean == group.low == group.high == (3.0, 4.0)


def test_terminal_ticks_read_as_numbers_do_elsewhere(capsys, monkeypatch):
    """Issue 50 item 12: `rlsup plot` in a terminal labelled its axes with plotext's raw floats (13735.5 steps);
    ticks fall on round numbers, labelled as formatting.short_count writes them (10k, 20k; 100, 200)."""
    from rlsup.cli.plot import draw_in_terminal

    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "30")
    draw_in_terminal([[Series("run-1", (0.0, 9_000.0, 27_471.0), (9.5, 120.25, 348.75))]], "Episode return")
    drawn = capsys.readouterr().out
    assert not re.search(r"\d\.\d{2,}|\d{4,}\.\d", drawn), drawn  # no 13735.5, no 87.4375
    assert "10k" in drawn and "20k" in drawn, drawn
    assert re.search(r"\b(100|200|300)\b", drawn), drawn


def test_ticks_fall_on_round_numbers_within_the_range():
    assert plot_ticks(0, 27_471, 4) == ([0, 10_000, 20_000], ["0", "10k", "20k"])
    assert plot_ticks(9.5, 348.75, 5)[0] == [100, 200, 300]
    assert plot_ticks(0.012, 0.013, 3)[1] == ["0.012", "0.0125", "0.013"]
    assert plot_ticks(5, 5, 4) == ([5], ["5"])
    assert plot_ticks(0.0, 5e-324, 4) == ([0.0, 5e-324], ["0", "4.94e-324"])  # no division by a power of 0
