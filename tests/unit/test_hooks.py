"""Hooks with a real store and real hook processes, reaped at moments the daemon's loop cannot choose."""
from __future__ import annotations

import logging
import sqlite3

from rlsup.daemon import hooks as hooks_module
from rlsup.daemon.hooks import Hooks
from rlsup.daemon.scheduler import Settings
from rlsup.daemon.store_watch import StoreWatch
from rlsup.jobs.state import State
from rlsup.jobs.store import Store


def test_a_hook_its_shell_killed_at_the_timeout_before_a_tick_saw_it_overdue_is_logged_as_timed_out(
        tmp_path, caplog) -> None:
    # CI found this: hook_shell.py kills the hook at its deadline, and on busy cores the daemon's next
    # tick may come only after that, reaping a process that is already gone without having said why.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Store(home) as store:
        job = store.submit(name="quick", spec_path=home / "quick.toml", run_dir=home / "runs" / "quick-1",
                           algo="dqn", env="CartPole-v1", total_steps=1000)
        hooks = Hooks(store)
        store.transition(job.id, State.STARTING, "test")
        store.transition(job.id, State.RUNNING, "test")
        store.transition(job.id, State.DONE, "test")
        settings = Settings(on_done="sleep 600", hook_timeout_s=0.5)
        hooks.follow(settings)
        [hook] = hooks.running
        hook.process.wait(timeout=30)  # no tick between its start and its end
        with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
            hooks.follow(settings)
    assert not hooks.running
    assert f"job {job.id}: on_done hook (pid {hook.process.pid}) killed at its timeout of 0.5 s" in caplog.text
    assert "killed by signal 9" in caplog.text


def failed_job(store: Store, home, name: str, reason: str):
    job = store.submit(name=name, spec_path=home / f"{name}.toml", run_dir=home / "runs" / f"{name}-1",
                       algo="dqn", env="CartPole-v1", total_steps=1000)
    store.transition(job.id, State.STARTING, "test")
    store.transition(job.id, State.FAILED, reason)
    return job


def test_an_on_failed_hook_runs_whatever_its_reason_holds(tmp_path, caplog) -> None:
    """Issue 49 item 15: a failure's reason is a worker's words, and Popen refuses an environment value holding a
    NUL (ValueError) or one past Linux's 128 KiB for a variable (E2BIG): the hook never ran."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    record = tmp_path / "record"
    record.mkdir()
    settings = Settings(on_failed=f'printf %s "$RLSUP_JOB_REASON" > {record}/$RLSUP_JOB_ID', hook_timeout_s=30)
    with Store(home) as store:
        hooks = Hooks(store)
        nul = failed_job(store, home, "nul", "crashed: bad\x00byte\nworker.log's last lines")
        long = failed_job(store, home, "long", "crashed: " + "x" * 200_000)
        with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
            hooks.follow(settings)
            for hook in hooks.running:
                hook.process.wait(timeout=30)
            hooks.follow(settings)
    assert not hooks.running
    assert (record / str(nul.id)).read_text() == "crashed: bad\\x00byte", caplog.text
    told = (record / str(long.id)).read_text()
    assert told.startswith("crashed: xxx") and len(told.encode()) <= hooks_module.ENVIRONMENT_VALUE_BYTES
    assert "could not start" not in caplog.text and "unexpected error" not in caplog.text


def test_a_hook_that_cannot_start_is_logged_and_the_next_one_runs(tmp_path, caplog) -> None:
    """Issue 49 item 15: a command the kernel refuses (past its 128 KiB for one argument) is one line in
    daemon.log; the loop goes on and the next transition's hook runs."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    record = tmp_path / "record"
    with Store(home) as store:
        hooks = Hooks(store)
        refused = failed_job(store, home, "refused", "crashed")
        with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
            hooks.follow(Settings(on_failed="true " + "x" * 200_000))
            failed_job(store, home, "next", "crashed")
            hooks.follow(Settings(on_failed=f"touch {record}"))
            for hook in hooks.running:
                hook.process.wait(timeout=30)
            hooks.follow(Settings())
    assert f"job {refused.id}: on_failed hook could not start: [Errno 7] Argument list too long" in caplog.text
    assert record.exists() and "unexpected error" not in caplog.text


def test_a_store_cut_under_the_hooks_is_left_to_the_daemons_store_watch(tmp_path, caplog) -> None:
    """CI found this: a store truncated under a running daemon was reported twice, once by the store watch
    (the one line the daemon stops with) and once by the hooks as "an unexpected error; the daemon carries on".
    A damaged file is the store watch's to name: the hooks raise it to the daemon's loop, which hands it there."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Store(home) as store:
        hooks = Hooks(store)
        store.connection.close()  # any error of the store's: SQLite itself notices a cut file only at random
        with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
            try:
                hooks.follow(Settings())
            except sqlite3.DatabaseError:
                pass
            else:
                raise AssertionError("the hooks swallowed the damaged store")
    assert "unexpected" not in caplog.text


def test_a_store_error_that_repeats_each_round_is_logged_once(tmp_path, caplog) -> None:
    """What the loop hands the watch and is not the file's fault (a full disk, a constraint) is retried each round:
    a traceback each time, as the loop first logged it, would fill the log, and on a full disk the disk."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    Store(home).close()
    watch = StoreWatch(home / "rlsup.db", stop=lambda: None)
    full = sqlite3.OperationalError("database or disk is full")
    with caplog.at_level(logging.INFO, logger="rlsup.daemon"):
        assert not watch.unreadable(full)
        for _round in range(3):
            watch.trouble(full)
        watch.trouble(sqlite3.IntegrityError("UNIQUE constraint failed: jobs.name"))
    assert caplog.text.count("database or disk is full") == 1 and caplog.text.count("UNIQUE constraint") == 1
    assert "Traceback" not in caplog.text and not watch.lost
