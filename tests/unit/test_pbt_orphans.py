"""A PBT generation's fork directories when its daemon was killed before the generation committed: deleted, and
nothing else (a job's directory, another experiment's, or what a link put in one's place points to)."""
from __future__ import annotations

from pathlib import Path

from rlsup import client
from rlsup.daemon import pbt_generations
from rlsup.jobs import standings
from rlsup.jobs.store import Store
from rlsup_testing import cartpole_job


def made(path: Path) -> Path:
    (path / "checkpoints").mkdir(parents=True)
    (path / "job.toml").write_text("[job]\n")
    return path


def test_a_killed_generations_directories_go_and_nothing_else(tmp_path: Path, rlsup_home: Path) -> None:
    runs = tmp_path / "runs"
    orphan, other_experiments = made(runs / "pbt-g1-m3"), made(runs / "other-g1-m2")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the daemon's")
    link = runs / "pbt-g1-m4"
    link.symlink_to(outside, target_is_directory=True)
    job = client.submit(cartpole_job(tmp_path), home=rlsup_home, start_daemon=False)  # a generation that committed
    with Store(rlsup_home) as store:
        for path in (orphan, link, Path(job.run_dir)):
            standings.note_unfinished_fork(store, "pbt", str(path))
        standings.note_unfinished_fork(store, "other", str(other_experiments))
        assert sorted(standings.orphaned_forks(store, "pbt")) == sorted([str(orphan), str(link)])

        pbt_generations.discard_orphans(store, "pbt")

        assert not orphan.exists() and Path(job.run_dir).is_dir() and other_experiments.is_dir()
        assert link.is_symlink() and (outside / "keep").read_text() == "not the daemon's"
        assert standings.orphaned_forks(store, "pbt") == [] and standings.orphaned_forks(store, "other")
