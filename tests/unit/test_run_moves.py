"""Moving a run under a cluster's run_root on real files: the copy verifies, and every kill point loses nothing."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from rlsup import locks, paths
from rlsup.checkpoint.manifest import list_checkpoints, verify
from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import write_checkpoint
from rlsup.daemon import moves
from rlsup.daemon.clusters import Cluster
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store


def made_run(parent: Path, name: str = "mover-20260101-000000-abcd", *, array_bytes: int = 4096) -> Path:
    """A run directory with job files and two real checkpoints."""
    run_dir = parent / name
    run_dir.mkdir(parents=True)
    (run_dir / paths.JOB_FILE).write_text("[job]\nname = 'mover'\n")
    (run_dir / paths.SOURCE_COPY).write_text("[job]\nname = 'mover'\n")
    (run_dir / paths.METRICS_FILE).write_text('{"step": 1}\n')
    for step in (100, 200):
        state = {"weights": torch.full((3,), float(step)), "replay": np.full(array_bytes, step % 251, np.uint8)}
        write_checkpoint(run_dir, state, step=step, episodes=1, reason="interval", fingerprint=f"print-{step}",
                         spec_sha256="spec", metrics_bytes=0, keep=5)
    return run_dir


def contents(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run but its lock, which the move takes (it holds the pid of the lock's last holder)."""
    return {str(path.relative_to(run_dir)): path.read_bytes() for path in sorted(run_dir.rglob("*"))
            if path.is_file() and path.name != paths.WORKER_LOCK}


def wait_discarded(mover: moves.RunMover) -> None:
    deadline = time.monotonic() + 30
    while mover.discarding:
        assert time.monotonic() < deadline, "the old run was not deleted in 30 s"
        time.sleep(0.01)


def test_a_move_copies_everything_verified_and_leaves_the_old_run_until_told(tmp_path: Path) -> None:
    old = made_run(tmp_path / "home" / "runs")
    before = contents(old)
    new = moves.move_run(old, tmp_path / "cluster")
    assert new == tmp_path / "cluster" / old.name and contents(old) == before
    copied = contents(new)
    assert copied.pop(moves.NOTE_FILE) and copied == before
    assert latest_verified(new).step == 200 and os.listdir(tmp_path / "cluster") == [old.name]


def test_a_move_killed_while_copying_leaves_the_old_run_intact_and_the_next_one_succeeds(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs", array_bytes=96 << 20)  # big enough to be caught copying
    before = contents(old)
    root = tmp_path / "cluster"
    mover = subprocess.Popen([sys.executable, "-c", "import sys; from rlsup.daemon.moves import move_run; "
                              "move_run(sys.argv[1], sys.argv[2])", str(old), str(root)])
    temporary = root / f"{moves.MOVING_PREFIX}{old.name}"
    deadline = time.monotonic() + 60
    while not temporary.exists() and mover.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    mover.send_signal(signal.SIGKILL)
    mover.wait()
    if mover.returncode != -signal.SIGKILL:
        pytest.skip("the copy finished before the kill reached it (a very fast disk)")
    assert contents(old) == before and not (root / old.name).exists()
    new = moves.move_run(old, root)  # the killed copy is replaced, not trusted
    assert latest_verified(new).step == 200 and sorted(os.listdir(root)) == [old.name]


def test_a_move_killed_after_its_rename_but_before_the_store_is_made_again(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs")
    root = tmp_path / "cluster"
    stale = moves.move_run(old, root)
    (stale / paths.METRICS_FILE).write_text("not the old run's\n")  # the copy is not trusted: it is made again
    new = moves.move_run(old, root)
    assert new == stale and (new / paths.METRICS_FILE).read_text() == '{"step": 1}\n'


def test_a_destination_that_is_not_a_copy_of_the_run_is_never_replaced(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs")
    other = made_run(tmp_path / "cluster", old.name)
    (other / "mine").write_text("another run's")
    with pytest.raises(moves.MoveFailed, match="already exists and is not a copy of"):
        moves.move_run(old, tmp_path / "cluster")
    assert (other / "mine").exists() and latest_verified(old).step == 200


def test_a_copy_whose_newest_checkpoint_does_not_verify_is_refused(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs")
    copy = tmp_path / "copy"
    shutil.copytree(old, copy)
    newest = list_checkpoints(copy)[-1].path
    damaged = next(path for path in sorted(newest.rglob("*")) if path.is_file() and path.stat().st_size > 1000)
    damaged.write_bytes(b"\xff" + damaged.read_bytes()[1:])
    with pytest.raises(moves.MoveFailed, match=f"the copy of {newest.name} does not verify"):
        moves._verify_copy(old, copy)
    shutil.copy(damaged, old / damaged.relative_to(copy))  # broken in the original too: not the copy's fault
    moves._verify_copy(old, copy)
    assert verify(old / newest.relative_to(copy)) is not None


def test_a_run_a_worker_trains_is_not_moved(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs")
    descriptor = locks.acquire(old / paths.WORKER_LOCK)
    try:
        with pytest.raises(moves.MoveFailed, match="trains .*; pause it first"):
            moves.move_run(old, tmp_path / "cluster")
    finally:
        os.close(descriptor)
    assert not (tmp_path / "cluster" / old.name).exists()


@pytest.mark.parametrize("killed", ["before hiding", "after hiding"])
def test_the_old_run_a_killed_daemon_left_after_the_store_update_goes_at_the_next_start(tmp_path: Path,
                                                                                       killed: str) -> None:
    old = made_run(tmp_path / "runs")
    with Store(tmp_path / "home") as store:
        job, new = moved_job(store, old, tmp_path / "cluster")
        if killed == "after hiding":
            moves.hide_old(old)
        mover = moves.RunMover(threading.Event())
        assert discard_recorded(mover, store, job.id) == [f"deleted old run {old}: the job's run moved to {new}"]
        assert os.listdir(tmp_path / "runs") == [] and not (new / moves.NOTE_FILE).exists()
        assert latest_verified(new).step == 200 and store.job(job.id).moved_from is None
        assert discard_recorded(mover, store, job.id) == []  # tidied: nothing left to do, nothing else touched
    assert latest_verified(new).step == 200


def moved_job(store: Store, old: Path, root: Path) -> tuple:
    """A job whose run was moved under root, the daemon killed before it deleted the old run."""
    job = store.submit(name="mover", spec_path=old / paths.SOURCE_COPY, run_dir=old, cluster="lab")
    new = moves.move_run(old, root)
    store.relocate(job.id, new, (old / paths.SOURCE_COPY, new / paths.SOURCE_COPY), "moved")
    return job, new


def discard_recorded(mover: moves.RunMover, store: Store, job_id: int) -> list[str]:
    """Step 5 for the job as the daemon does it, and the event messages it recorded."""
    mover.discard(store, job_id)
    wait_discarded(mover)
    messages = []
    for discarded_id, kind, message in mover.take_discards():
        store.forget_moved_from(discarded_id, kind, message)
        messages.append(message)
    return messages


def directory_link(old: Path, victim: Path) -> None:
    shutil.rmtree(old)
    old.symlink_to(victim, target_is_directory=True)


def emptied_of_its_job_file(old: Path, victim: Path) -> None:
    shutil.rmtree(old)
    shutil.copytree(victim, old)
    (old / paths.JOB_FILE).unlink()


@pytest.mark.parametrize("tamper", [directory_link, emptied_of_its_job_file])
def test_a_recorded_old_run_that_is_no_longer_a_run_is_kept_with_an_event(tmp_path: Path, tamper) -> None:
    victim = made_run(tmp_path / "home" / "runs", "someone-else-20260101-000000-beef")
    before = contents(victim)
    old = made_run(tmp_path / "runs")
    with Store(tmp_path / "home") as store:
        job, new = moved_job(store, old, tmp_path / "cluster")
        tamper(old, victim)
        messages = discard_recorded(mover := moves.RunMover(threading.Event()), store, job.id)
        assert len(messages) == 1 and messages[0].startswith(f"old run {old} not deleted after the move to {new}")
        assert [event.kind for event in store.events(job.id, 100)][-1] == "kept"
        assert discard_recorded(mover, store, job.id) == []
    assert contents(victim) == before and os.path.lexists(old)


def test_the_store_follows_the_move_and_a_failed_one_pauses_the_job_with_why(tmp_path: Path) -> None:
    old = made_run(tmp_path / "runs")
    with Store(tmp_path / "home") as store:
        job = store.submit(name="mover", spec_path=old / paths.SOURCE_COPY, run_dir=old, cluster="lab")
        sibling = store.submit(name="seed-2", spec_path=old / paths.SOURCE_COPY, run_dir=tmp_path / "seed-2",
                               experiment="sweep")  # an experiment's jobs all follow the copy in its first run
        refused = store.submit(name="other", spec_path=tmp_path / "job.toml", run_dir=tmp_path / "elsewhere",
                               cluster="lab")
        mover = moves.RunMover(threading.Event())
        new = moves.move_run(old, tmp_path / "cluster")
        moves.record(mover, store, moves.Moved(job.id, old, new, seconds=0.5, size=3_000_000))
        moves.record(mover, store, moves.Moved(refused.id, tmp_path / "elsewhere", error="no space left"))
        moved, paused, store_spec_path = store.job(job.id), store.job(refused.id), store.job(sibling.id).spec_path
        events = [event.message for event in store.events(job.id, 100) if event.kind == "moved"]
    assert (Path(moved.run_dir), Path(moved.spec_path)) == (new, new / paths.SOURCE_COPY)
    assert (Path(sibling.run_dir), Path(store_spec_path)) == (tmp_path / "seed-2", new / paths.SOURCE_COPY)
    assert events == [f"moved run from {old} to {new} for cluster lab (3.0 MB in 0.5 s)"]
    assert (paused.state, paused.desired) == (State.PAUSED, Desired.PAUSED)
    assert paused.reason.startswith("cannot move the run to cluster lab: no space left")
    assert paused.reason.endswith("resume to try again")
    wait_discarded(mover)
    assert not old.exists() and latest_verified(new).step == 200
    assert mover.take_discards() == [(job.id, "deleted", f"deleted old run {old}: the job's run moved to {new}")]


def test_a_note_naming_another_directory_deletes_nothing(tmp_path: Path) -> None:
    """moved-from.json lies under run_root, which the cluster's nodes write: it is no licence to delete (issue 23)."""
    victim = made_run(tmp_path / "home" / "runs", "someone-else-20260101-000000-beef")
    before = contents(victim)
    new = made_run(tmp_path / "cluster")
    (new / moves.NOTE_FILE).write_text(json.dumps({"from": str(victim), "time": 0}))
    with Store(tmp_path / "home") as store:
        job = store.submit(name="mover", spec_path=new / paths.SOURCE_COPY, run_dir=new, cluster="lab")
        mover = moves.RunMover(threading.Event())
        lab = Cluster(name="lab", address="http://head:8265", run_root=str(tmp_path / "cluster"))
        assert moves.ready_to_start(mover, store, job, (lab,))
        wait_discarded(mover)
    assert contents(victim) == before


def test_a_run_with_dangling_and_outward_links_moves_with_its_links_as_links(tmp_path: Path) -> None:
    """Links are copied as links and sized as links, never followed: a dangling one blocked the move for ever."""
    old = made_run(tmp_path / "runs")
    (old / "dangling").symlink_to(tmp_path / "nowhere")
    (old / "outward").symlink_to(tmp_path, target_is_directory=True)
    mover = moves.RunMover(threading.Event())
    assert mover.begin(1, old, tmp_path / "cluster")
    deadline = time.monotonic() + 60
    while not (finished := mover.finished()):
        assert time.monotonic() < deadline, "the move did not end in 60 s"
        time.sleep(0.01)
    assert finished[0].error == "" and finished[0].new == tmp_path / "cluster" / old.name
    new = finished[0].new
    assert os.readlink(new / "dangling") == str(tmp_path / "nowhere")
    assert os.readlink(new / "outward") == str(tmp_path) and latest_verified(new).step == 200
