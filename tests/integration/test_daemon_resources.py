"""The daemon's loop and resources under attack (issue 23): a huge log line, a flooding hook, a lost store."""
from __future__ import annotations

from pathlib import Path

from rlsup import paths
from rlsup.run import files as runfiles
from rlsup.daemon import main as daemon_main
from rlsup.jobs.state import Desired, State

HUGE_LINE = 24 * 1024 * 1024


def bytes_read_by(pid: int) -> int:
    """Every byte process pid has read through read() and its kin (/proc's rchar), files and pipes alike."""
    fields = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(fields["rchar"])


def test_a_failing_job_with_a_24_mib_log_line_is_quoted_within_a_fixed_bound(harness) -> None:
    breaks = harness.submit(harness.job_file("breaks", total_steps=1_500))
    harness.store.set_desired(breaks.id, Desired.PAUSED)  # held until the daemon's reads are counted
    run_dir = Path(breaks.run_dir)
    # A `\r` progress bar's one line, then a run whose job.toml no longer parses: its worker exits 2.
    (run_dir / paths.LOG_FILE).write_bytes(b"progress" + b"#" * HUGE_LINE)
    (run_dir / paths.JOB_FILE).write_text("[job]\ntotal_steps = -1\n")
    daemon = harness.start_daemon()
    harness.wait_state(breaks.id, State.PAUSED)
    before = bytes_read_by(daemon.pid)
    harness.store.set_desired(breaks.id, Desired.RUNNING)

    failed = harness.wait_state(breaks.id, State.FAILED)
    # The daemon read the log's end, not the whole line, on its loop: a bound that no file size moves.
    assert bytes_read_by(daemon.pid) - before < HUGE_LINE // 4
    quoted = failed.reason.partition("last lines of worker.log:\n")[2]
    assert quoted.startswith(runfiles.CUT_MARK), failed.reason[:2000]
    assert len(quoted.encode()) <= runfiles.QUOTED_TAIL_BYTES + 200 * daemon_main.LOG_TAIL_LINES
    code, out, err = harness.cli("logs", str(breaks.id), "-n", "5")
    assert code == 0, err
    assert len(out.encode()) <= runfiles.TAIL_BYTES + 2000 and runfiles.CUT_MARK in out
