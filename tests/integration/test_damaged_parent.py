"""A fork's parent.json is read as data: a mistyped field is one line in status and the TUI, and exit 2 (never
retried) for the fork's worker, naming the file and the field (issue 23 item 13)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rlsup_testing import run_rlsup

from rlsup.run import lineage
from rlsup.run.exit import EXIT_SPEC, read_exit
from rlsup.jobs.state import State


@pytest.mark.parametrize("field, value", [("step", "x"), ("fingerprint", 5)])
def test_a_mistyped_parent_json_is_one_line_and_fails_the_fork_at_once(harness, field, value) -> None:
    harness.start_daemon()
    parent_file = harness.job_file("p", total_steps=1_000, checkpoint_every=500)
    parent = harness.submit(parent_file)
    harness.wait_state(parent.id, State.DONE)
    harness.kill_daemon()
    harness.settings(cpu_jobs=0)  # the fork waits in the queue while its parent.json is damaged
    harness.start_daemon()
    code, out, err = harness.cli("fork", parent.id, parent_file, "--checkpoint", "500", "--name", "f")
    assert code == 0, err
    fork = harness.job(int(out))
    parent_json = Path(fork.run_dir) / lineage.PARENT_FILE
    recorded = json.loads(parent_json.read_text())
    parent_json.write_text(json.dumps({**recorded, field: value}))

    shown = run_rlsup("status", str(fork.id))
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert f"{parent_json}: {field} must be" in shown.stdout, shown.stdout

    harness.kill_daemon()
    harness.settings(cpu_jobs=1)
    harness.start_daemon()
    failed = harness.wait_state(fork.id, State.FAILED, timeout=120)
    assert failed.restarts == 0, harness.report(fork.id)
    ended = read_exit(Path(fork.run_dir))
    assert ended.code == EXIT_SPEC, ended
    assert f"{parent_json}: {field} must be" in ended.reason and "\n" not in ended.reason, ended
