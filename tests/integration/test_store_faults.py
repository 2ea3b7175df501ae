"""The store under attack (issue 23): a write lock held by another process, a corrupt file, a lost file."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rlsup import client, paths
from rlsup.jobs import store_file
from rlsup.run.exit import EXIT_PAUSED, EXIT_STORE_LOST, read_exit
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store
from rlsup_testing import alive, assert_one_line_error, cartpole_job, run_rlsup

# Holds a real write transaction on the database named by argv[1] until its stdin closes.
HOLD_WRITE_LOCK = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1], isolation_level=None)
connection.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def write_lock_held(database: Path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD_WRITE_LOCK, str(database)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_a_held_write_lock_lets_list_read_and_makes_pause_one_line_that_loses_nothing(harness) -> None:
    job = harness.submit(harness.job_file("waits"))
    with write_lock_held(harness.home / paths.DATABASE):
        listed = run_rlsup("list")
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        assert "waits" in listed.stdout
        # The store answers no write for as long as the lock is held: the pause is reported, not recorded.
        paused = run_rlsup("pause", str(job.id))
        assert_one_line_error(paused, 1, "busy", "pause", "not recorded", "again")
        assert harness.job(job.id).desired is Desired.RUNNING
    again = run_rlsup("pause", str(job.id))
    assert again.returncode == 0, again.stderr
    assert harness.wait_state(job.id, State.PAUSED).desired is Desired.PAUSED


def test_a_database_of_garbage_is_one_line_from_every_command(rlsup_home, tmp_path) -> None:
    job_file = cartpole_job(tmp_path, name="garbage")
    database = rlsup_home / paths.DATABASE
    database.write_bytes(b"this is not a database\n" * 500)
    commands = [["list"], ["list", "--json"], ["submit", job_file], ["pause", "1"], ["resume", "1"], ["kill", "1"],
                ["logs", "1"], ["status", "1"], ["checkpoints", "1"], ["daemon", "status"], ["daemon", "start"],
                ["fork", "1", job_file], ["plot", "1"],
                ["export", "1", "--format", "torchscript", "--out", tmp_path / "policy.pt"]]
    try:
        for command in commands:
            result = run_rlsup(*command)
            assert result.returncode != 0, command
            assert_one_line_error(result, result.returncode, str(database), "not an rlsup store")
    finally:
        daemon = client.daemon_status(rlsup_home)
        if daemon.pid:  # a daemon that started on a store it cannot read would be the defect
            os.kill(daemon.pid, signal.SIGKILL)
    # Completion prints nothing rather than a traceback into the user's shell.
    completed = run_rlsup("__complete", "jobs")
    assert completed.stdout == "" and "Traceback" not in completed.stderr
    assert database.read_bytes() == b"this is not a database\n" * 500  # nothing overwrote it


def daemon_training(harness):
    """(the daemon, a long job, its worker's pid) once the worker has trained a little."""
    daemon = harness.start_daemon()
    job = harness.submit(harness.job_file("trains", total_steps=1_000_000, checkpoint_every=0))
    harness.wait_step(job.id, 100)
    return daemon, job, harness.job(job.id).pid


def assert_stopped_for_the_store(harness, daemon) -> None:
    """The daemon stops on its own with the store's exit code, after one line naming the store."""
    harness.wait_for(lambda: daemon.poll() is not None, timeout=60, what="the daemon to stop",
                     report=harness.daemon_log)
    assert daemon.returncode == EXIT_STORE_LOST
    errors = [line for line in harness.daemon_log().splitlines() if "ERROR" in line]
    assert len(errors) == 1 and str(harness.home / paths.DATABASE) in errors[0] and "stops" in errors[0], errors


def pause_by_its_signal(harness, worker: int, job) -> None:
    """SIGINT, as the listing tells the user: the worker writes its pause checkpoint and exits 75."""
    os.kill(worker, signal.SIGINT)
    harness.wait_for(lambda: not alive(worker), timeout=120, what="the worker to pause")
    assert read_exit(Path(job.run_dir)).code == EXIT_PAUSED


@pytest.mark.parametrize("damage", ["unlink", "truncate"])
def test_a_store_lost_under_a_running_daemon_is_never_silently_replaced(harness, damage) -> None:
    daemon, job, worker = daemon_training(harness)
    database = harness.home / paths.DATABASE
    if damage == "unlink":
        database.unlink()
    else:  # everything checkpointed into the file first, so that cutting it loses the jobs
        harness.store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        os.truncate(database, 0)

    # The daemon notices its file is not the store any more, and stops with one line and its own code.
    assert_stopped_for_the_store(harness, daemon)
    # Clients refuse to make an empty store where one was, each in one line that says how to go on.
    for command in (["list"], ["pause", str(job.id)], ["submit", harness.job_file("another")]):
        assert_one_line_error(run_rlsup(*command), 1, str(database), "had a store", "restore it")
    assert not database.exists() or database.stat().st_size == 0
    assert alive(worker), "the worker goes on training: nothing was lost but the store"

    # The user begins again: the worker no job owns is listed, with what stops it. (No connection stays open on
    # the old store: one would keep a new client from making a cut file a store again.)
    harness.store.close()
    store_file.made_mark(database).unlink()
    listed = run_rlsup("list")
    harness.store = Store(harness.home)
    assert listed.returncode == 0, listed.stderr
    assert f"pid {worker}" in listed.stderr and job.run_dir in listed.stderr and "kill -INT" in listed.stderr
    pause_by_its_signal(harness, worker, job)


def test_a_write_lock_held_past_the_busy_timeout_fails_no_job_and_stops_no_daemon(harness) -> None:
    daemon, job, worker = daemon_training(harness)
    with write_lock_held(harness.home / paths.DATABASE):
        # The daemon's writes (the step it follows) wait out their busy timeout and find the store busy.
        harness.wait_for(lambda: "busy" in harness.daemon_log(), timeout=120, what="the daemon to find the store busy")
    moved = harness.wait_step(job.id, harness.job(job.id).step + 100)
    assert moved.pid == worker and alive(worker), harness.report(job.id)
    assert harness.job(job.id).state is State.RUNNING and daemon.poll() is None


def test_listing_unowned_workers_reads_no_lock_that_is_not_a_file(rlsup_home) -> None:
    runs = rlsup_home / "runs"
    for name in ("fifo", "link", "plain"):
        (runs / name).mkdir(parents=True)
    (runs / "a-file").touch()
    os.mkfifo(runs / "fifo" / paths.WORKER_LOCK)  # opened to read, it would wait for a writer for ever
    (runs / "link" / paths.WORKER_LOCK).symlink_to("/dev/zero")
    (runs / "plain" / paths.WORKER_LOCK).touch()  # a lock nobody holds
    Store(rlsup_home).close()
    listed = run_rlsup("list", timeout=60)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr


def test_a_store_damaged_in_place_under_a_running_daemon_stops_it_and_kills_no_worker(harness) -> None:
    daemon, job, worker = daemon_training(harness)
    database = harness.home / paths.DATABASE
    harness.store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the pages live in the file itself
    size = database.stat().st_size
    with open(database, "r+b") as handle:  # the same file, the same size: only its bytes are garbage
        handle.write(b"\xa5" * size)
    assert_stopped_for_the_store(harness, daemon)
    assert alive(worker), "the daemon killed a worker for a fault of the store"
    pause_by_its_signal(harness, worker, job)
