"""A Ray head that stops answering is logged once, then at growing intervals, and once when it is back."""
from __future__ import annotations

import logging

import pytest

from rlsup.daemon.ray_runner import UNREACHABLE_LOG_AFTER_S, RayUnreachable, UnreachableLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_unanswering_head_is_logged_at_growing_intervals_and_its_return_once(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    unreachable = UnreachableLog("lab", clock=clock)
    caplog.set_level(logging.WARNING, logger="rlsup.daemon")
    error = RayUnreachable("cluster lab: connection refused")
    warned_at = []
    for _ in range(int(3 * 3600 / 0.5)):  # three hours of polls every 0.5 s
        before = len(caplog.records)
        unreachable.failed(error)
        if len(caplog.records) > before:
            warned_at.append(clock.now - 1000.0)
        clock.now += 0.5
    assert UNREACHABLE_LOG_AFTER_S == (60.0, 300.0, 1800.0)
    assert warned_at[:4] == [0.0, 60.0, 360.0, 2160.0]  # then every 1800 s
    assert {later - earlier for earlier, later in zip(warned_at[3:], warned_at[4:])} == {1800.0}
    assert len(warned_at) == 4 + int((3 * 3600 - 2160) / 1800 - 1e-9)
    assert all("cluster lab: connection refused" in record.getMessage() for record in caplog.records)

    caplog.clear()
    unreachable.answered()
    unreachable.answered()
    assert [record.getMessage() for record in caplog.records] == [
        "cluster lab: the Ray head answers again after 10800 s"]

    caplog.clear()
    unreachable.failed(error)  # a new outage starts the intervals again
    clock.now += 1.0
    unreachable.failed(error)
    assert len(caplog.records) == 1
