"""The daemon's guard on its store's file, with a real SQLite store cut and written again under it."""
from __future__ import annotations

import os

from rlsup.jobs.store import Store
from rlsup.jobs.store_file import FileGuard


def test_a_store_cut_to_nothing_then_written_again_by_the_daemon_itself_is_still_seen_as_cut(tmp_path) -> None:
    # CI found this: the daemon's own next write (a hardware sample, its WAL checkpointed) put pages back at
    # their offsets, so the cut file was as long as before by the time the guard looked, and read "malformed"
    # for ever after while the daemon ran on, its job failing nothing but never paused either.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Store(home) as store:
        database = home / "rlsup.db"
        for number in range(50):
            store.submit(name=f"job{number}", spec_path=home / "a.toml", run_dir=home / "runs" / f"a-{number}",
                         algo="dqn", env="CartPole-v1", total_steps=1000)
        store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        guard = FileGuard(database)
        size = database.stat().st_size
        os.truncate(database, 0)
        with open(database, "r+b") as file:  # what a checkpoint of the daemon's later writes does
            file.seek(size - 4096)
            file.write(b"\x01" * 4096)
        assert database.stat().st_size == size
        assert guard.lost() == "was cut: it no longer begins as an SQLite database"


def test_an_intact_growing_store_is_not_lost(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    with Store(home) as store:
        guard = FileGuard(home / "rlsup.db")
        for number in range(30):
            store.submit(name=f"job{number}", spec_path=home / "a.toml", run_dir=home / "runs" / f"a-{number}",
                         algo="dqn", env="CartPole-v1", total_steps=1000)
            store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            assert guard.lost() is None
