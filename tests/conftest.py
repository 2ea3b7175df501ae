"""Shared fixtures: every test gets its own RLSUP_HOME, so nothing touches the user's runs."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
JOBS = ROOT / "jobs"


@pytest.fixture(autouse=True)
def rlsup_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("rlsup-home")
    monkeypatch.setenv("RLSUP_HOME", str(home))
    return home
