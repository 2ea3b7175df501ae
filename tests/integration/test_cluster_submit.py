"""Submitting to a cluster reads daemon.toml for its run_root: a missing cluster or a bad file is one line."""
from __future__ import annotations

from pathlib import Path

import pytest
from rlsup_testing import assert_one_line_error, cartpole_job, run_rlsup

from rlsup import paths
from rlsup.run.exit import EXIT_SPEC
from rlsup.jobs.store import Store

LAB = "[[cluster]]\nname = 'lab'\naddress = 'http://127.0.0.1:9'\n"


@pytest.mark.parametrize("settings, fragments", [
    (None, ["no [[cluster]] named 'lab' in daemon.toml"]),
    (LAB + "run_root = 'runs'\n", ["daemon.toml: cluster[0].run_root: must be an absolute path"]),
    ("[[cluster\n", ["daemon.toml: ", "line 1"]),
], ids=["no-daemon-toml", "relative-run-root", "not-toml"])
def test_a_cluster_submit_without_a_usable_cluster_is_one_line_and_queues_nothing(
        tmp_path: Path, rlsup_home: Path, settings: str | None, fragments: list[str]) -> None:
    if settings is not None:
        (rlsup_home / paths.DAEMON_SETTINGS).write_text(settings)
    result = run_rlsup("submit", cartpole_job(tmp_path), "--cluster", "lab")
    assert_one_line_error(result, EXIT_SPEC, "[job] cluster = 'lab': ", *fragments)
    with Store(rlsup_home) as store:
        assert store.jobs() == []
    assert not list(paths.runs_dir(rlsup_home).iterdir())  # no run directory made for it

