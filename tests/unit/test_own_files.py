"""Files rlsup writes in a run are never written through a link, and directories it reads are never links (issue 23)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from checkpoint_testing import dot_entries, small_state, write
from rlsup import locks, paths, spec as specs
from rlsup.run import files as runfiles
from rlsup.run.status import Phase, WorkerStatus, read_worker_status, write_worker_status
from rlsup.checkpoint.directories import rotate
from rlsup.checkpoint.manifest import MANIFEST_FILE, CheckpointsUnreadable, list_checkpoints, verify
from rlsup.checkpoint.choose import newest_usable, resolve
from rlsup.own_files import NotOwnFile, open_beneath
from rlsup.worker.tensorboard import EventFile
from rlsup_testing import cartpole_job, run_rlsup

OUTSIDE = b"somebody else's file\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_bytes(OUTSIDE)
    return path


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "run"
    directory.mkdir()
    return directory


def test_an_atomic_write_never_follows_a_link_planted_at_its_temporary_name(run_dir: Path, outside: Path) -> None:
    (run_dir / f".{paths.STATUS_FILE}.{os.getpid()}.partial").symlink_to(outside)
    write_worker_status(run_dir, WorkerStatus(phase=Phase.RUNNING))
    assert outside.read_bytes() == OUTSIDE
    assert read_worker_status(run_dir) == WorkerStatus(phase=Phase.RUNNING)


def test_a_lock_file_linked_outside_is_refused_not_truncated(run_dir: Path, outside: Path) -> None:
    (run_dir / paths.WORKER_LOCK).symlink_to(outside)
    with pytest.raises(NotOwnFile, match="symbolic link"):
        locks.acquire(run_dir / paths.WORKER_LOCK)
    assert outside.read_bytes() == OUTSIDE
    assert locks.holder(run_dir / paths.WORKER_LOCK).held is False


def test_a_fifo_lock_file_is_not_waited_on(run_dir: Path) -> None:
    os.mkfifo(run_dir / paths.WORKER_LOCK)
    assert locks.holder(run_dir / paths.WORKER_LOCK).held is False  # before: blocked for ever


def test_a_run_spec_history_linked_outside_is_refused(run_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / paths.SPEC_HISTORY).symlink_to(elsewhere)
    with pytest.raises(NotOwnFile):
        runfiles.check_own_files(run_dir)
    with pytest.raises(NotOwnFile):
        runfiles.write_run_spec(run_dir, specs.load(cartpole_job(tmp_path)))
    assert list(elsewhere.iterdir()) == []


def test_a_tensorboard_directory_linked_outside_gets_no_event_file(run_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_dir / paths.TENSORBOARD).symlink_to(elsewhere)
    with pytest.raises(NotOwnFile):
        EventFile.create(run_dir / paths.TENSORBOARD)
    assert list(elsewhere.iterdir()) == []


def test_metrics_and_event_files_are_private(run_dir: Path) -> None:
    runfiles.MetricsWriter(run_dir).close()
    EventFile.create(run_dir / paths.TENSORBOARD).close()
    created = [run_dir / paths.METRICS_FILE, *(run_dir / paths.TENSORBOARD).iterdir()]
    assert {stat.S_IMODE(path.stat().st_mode) for path in created} == {0o600}


def test_checkpoints_linked_outside_are_neither_listed_nor_rotated(run_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    for step in (1, 2, 3):
        write(elsewhere, small_state(step), step)
    before = sorted(os.listdir(elsewhere / paths.CHECKPOINTS))
    (run_dir / paths.CHECKPOINTS).symlink_to(elsewhere / paths.CHECKPOINTS)
    assert rotate(run_dir, keep=1) == []  # before: deleted two checkpoints of the other run
    assert sorted(os.listdir(elsewhere / paths.CHECKPOINTS)) == before
    with pytest.raises(CheckpointsUnreadable, match="symbolic link"):
        newest_usable(run_dir, strict=True)


def test_a_fifo_among_foreground_registrations_does_not_hang_list(rlsup_home: Path) -> None:
    registry = rlsup_home / paths.FOREGROUND
    registry.mkdir(parents=True)
    os.mkfifo(registry / "1234.json")
    result = run_rlsup("list", timeout=30)  # before: read the FIFO for ever
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr


def test_a_checkpoint_held_as_a_link_is_replaced_without_touching_its_target(run_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, small_state(2), 2)
    write(run_dir, small_state(1), 1)
    (run_dir / paths.CHECKPOINTS / "step-000000000002").symlink_to(elsewhere / paths.CHECKPOINTS / "step-000000000002")
    write(run_dir, small_state(2), 2)  # the same step again: the link is moved aside and removed, as a link
    assert dot_entries(run_dir) == []  # before: the aside link stayed for ever (rmtree refuses a link)
    assert [entry.step for entry in list_checkpoints(elsewhere)] == [2]
    assert not (run_dir / paths.CHECKPOINTS / "step-000000000002").is_symlink()


def test_a_status_file_that_is_a_directory_is_refused_before_training(run_dir: Path) -> None:
    (run_dir / paths.STATUS_FILE).mkdir()
    with pytest.raises(NotOwnFile, match="is a directory"):
        runfiles.check_own_files(run_dir)


def test_a_checkpoint_directory_that_is_a_link_is_not_verified_through(run_dir: Path, tmp_path: Path) -> None:
    """Issue 49 item 11: open_beneath opened its top directory through a link, so a fork's parent-checkpoint/
    linked to a checkpoint outside the run verified (and trained) as if it were the fork's own."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, small_state(2), 2)
    outside = elsewhere / paths.CHECKPOINTS / "step-000000000002"
    assert verify(outside) is None
    (run_dir / paths.INHERITED_CHECKPOINT).symlink_to(outside)
    with pytest.raises(NotOwnFile, match=f"{run_dir / paths.INHERITED_CHECKPOINT} is a symbolic link"):
        open_beneath(run_dir / paths.INHERITED_CHECKPOINT, (MANIFEST_FILE,))
    assert verify(run_dir / paths.INHERITED_CHECKPOINT) is not None
    with pytest.raises(NotOwnFile, match=f"{paths.INHERITED_CHECKPOINT} is a symbolic link"):
        runfiles.check_own_files(run_dir)


def test_a_checkpoint_path_the_user_gives_may_be_a_link_of_theirs(run_dir: Path, tmp_path: Path) -> None:
    """Issue 49 item 11's other side: `--checkpoint PATH` typed by the user still follows their own link."""
    write(tmp_path / "kept", small_state(2), 2)
    (tmp_path / "mine").symlink_to(tmp_path / "kept" / paths.CHECKPOINTS / "step-000000000002")
    entry = resolve(run_dir, str(tmp_path / "mine"))
    assert entry.step == 2 and verify(entry.path) is None


def test_a_runs_job_file_is_never_read_through_a_link(run_dir: Path, tmp_path: Path) -> None:
    """Issue 49 item 16: a run's job.toml that is a link to a job file outside the run was loaded through it
    (spec.load's read_regular follows links, which is right for a user's own job file only)."""
    elsewhere = cartpole_job(tmp_path, name="elsewhere")
    (run_dir / paths.JOB_FILE).symlink_to(elsewhere)
    with pytest.raises(specs.SpecError, match=f"{run_dir / paths.JOB_FILE} is a symbolic link") as refused:
        runfiles.read_run_spec(run_dir)
    assert "\n" not in str(refused.value)
    assert specs.load(run_dir / paths.JOB_FILE).env.id == "CartPole-v1"  # a user's job file may be a link


def test_a_runs_job_file_is_read_within_the_limit_of_a_runs_json_files(run_dir: Path) -> None:
    """Issue 49 item 14: a received run's sparse 2 GiB job.toml was read whole (4.1 GiB held for 12-26 s)
    before it was found not to be TOML; it is refused unread, past the limit a run's status.json has."""
    with open(run_dir / paths.JOB_FILE, "wb") as handle:
        handle.truncate(2 << 30)  # sparse: no disk used
    with pytest.raises(specs.SpecError, match=f"{run_dir / paths.JOB_FILE} is larger than 16 MiB"):
        runfiles.read_run_spec(run_dir)
