"""LossSums gives the same means as summing each update's floats in Python, across a checkpoint too."""
from __future__ import annotations

import random

import pytest
import torch

from rlsup.algos.loss_sums import Diverged, LossSums


def updates(count: int, seed: int) -> list[dict[str, torch.Tensor]]:
    generator = random.Random(seed)
    return [{"loss": torch.tensor(generator.uniform(-1e3, 1e3)), "q": torch.tensor(generator.gauss(0, 1e-3))}
            for _ in range(count)]


def python_means(values: list[dict[str, torch.Tensor]]) -> dict[str, float]:
    """What the trainers computed before: a float sum of .item() per update, over the count."""
    sums = {"loss": 0.0, "q": 0.0}
    for update in values:
        for name, value in update.items():
            sums[name] += value.item()
    return {name: total / len(values) for name, total in sums.items()}


def test_means_are_the_python_float_sums_bit_for_bit():
    sums = LossSums(("loss", "q"))
    values = updates(57, seed=1)
    for update in values:
        sums.add(update)
    assert sums.means() == python_means(values)
    assert sums.means() == {}  # read means reset


def test_sums_saved_mid_line_continue_exactly():
    values = updates(40, seed=2)
    straight = LossSums(("loss", "q"))
    for update in values:
        straight.add(update)
    first = LossSums(("loss", "q"))
    for update in values[:13]:
        first.add(update)
    resumed = LossSums(("loss", "q"))
    resumed.load(first.totals(), first.count)
    for update in values[13:]:
        resumed.add(update)
    assert resumed.count == 40
    assert resumed.means() == straight.means() == python_means(values)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_a_non_finite_loss_is_refused_when_read_for_a_metrics_line_or_a_checkpoint(bad):
    sums = LossSums(["loss", "q"])
    for update in updates(5, seed=2):
        sums.add(update)
    sums.add({"loss": torch.tensor(1.0), "q": torch.tensor(bad)})
    sums.add({"loss": torch.tensor(1.0), "q": torch.tensor(0.0)})  # a finite one after cannot hide it
    for read in (sums.totals, sums.means):
        with pytest.raises(Diverged, match=r"^training diverged: the q of the last 7 updates reached NaN"):
            read()


def test_sums_from_a_learner_that_measured_fewer_scalars_start_the_line_afresh():
    # A checkpoint written before a scalar was added (V-trace's grad_norm) lacks its sum: the first line
    # after resuming then averages the updates since, every scalar over the same ones, rather than failing.
    older = LossSums(("loss",))
    for update in updates(9, seed=3):
        older.add({"loss": update["loss"]})
    resumed = LossSums(("loss", "q"))
    resumed.load(older.totals(), older.count)
    assert resumed.count == 0 and resumed.means() == {}
    values = updates(4, seed=4)
    for update in values:
        resumed.add(update)
    assert resumed.means() == python_means(values)
