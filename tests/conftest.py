"""Shared fixtures: every test gets its own RLSUP_HOME, so nothing touches the user's runs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).parents[1]
JOBS = ROOT / "jobs"


@pytest.fixture(autouse=True)
def rlsup_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("rlsup-home")
    monkeypatch.setenv("RLSUP_HOME", str(home))
    return home


@pytest.fixture(scope="session", autouse=True)
def cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The suite's own XDG cache, shared by its tests (JAX's compiled game steps: jax_games.cache_folder), so
    that nothing lands in the user's ~/.cache and each game compiles once a worker, not once a process."""
    folder = tmp_path_factory.mktemp("cache-home")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(folder)
    yield folder
    if previous is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = previous


# Seconds a slow test may take before pytest-timeout ends it as hung: its own subprocess timeouts are the real
# limits, and the suite's 300 s guard is too near what two trainings beside each other take on 2 cores.
SLOW_TEST_TIMEOUT_S = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests get a longer hang guard, and their files run first.

    Longest first is what keeps two workers busy to the end: xdist hands out files in collection order (with
    --no-loadscope-reorder; by default it puts the files with fewest tests last, which are the learning tests,
    minutes each, so one worker trained them alone while the other had nothing left)."""
    slow_files = set()
    for item in items:
        if item.get_closest_marker("slow") is not None:
            slow_files.add(item.path)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file keeps its order
