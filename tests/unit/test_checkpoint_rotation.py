"""Checkpoint store: listing, resolving by step, latest or best, rotation and same-step rewrites on real files."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlsup.checkpoint.manifest import list_checkpoints, read_manifest, verify
from rlsup.checkpoint.choose import CheckpointNotFound, latest_verified, resolve
from rlsup.checkpoint.directories import rotate
from rlsup.checkpoint.store import load_checkpoint
from checkpoint_testing import dead_pid, dot_entries, flip_last_byte, small_state, write  # noqa: F401 (dead_pid: a fixture)


def test_listing_skips_temporary_and_manifestless_directories(tmp_path):
    write(tmp_path, small_state(1), 5)
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "step-000000000009").mkdir()  # a crash before the manifest
    (checkpoints / "step-000000000008").mkdir()
    (checkpoints / "step-000000000008" / "manifest.json").write_text('{"step": 8, "fil')  # half-written
    (checkpoints / ".tmp-step-000000000007-1-ab").mkdir()
    assert read_manifest(checkpoints / "step-000000000008") is None
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [5]
    assert list_checkpoints(tmp_path / "nowhere") == []


def test_entry_describes_the_checkpoint(tmp_path):
    entry = write(tmp_path, small_state(1), 40, updates=7)
    listed = list_checkpoints(tmp_path)[0]
    assert listed == entry
    described = entry.to_json()
    assert {key: described[key] for key in ("step", "reason", "path", "fingerprint", "episodes")} == {
        "step": 40, "reason": "interval", "path": str(entry.path), "fingerprint": "print-40", "episodes": 4}
    assert described["bytes"] == sum(path.stat().st_size for path in entry.path.rglob("*")
                                     if path.is_file() and path.name != "manifest.json")
    assert described["extra"] == {"updates": 7} and entry.metrics_bytes == 120


def test_resolve_by_latest_step_and_path(tmp_path):
    with pytest.raises(CheckpointNotFound, match="has no checkpoints"):
        resolve(tmp_path, "latest")
    write(tmp_path, small_state(1), 100)
    second = write(tmp_path, small_state(2), 200)
    assert resolve(tmp_path, "latest").path == second.path
    assert resolve(tmp_path, "100").step == 100
    assert resolve(tmp_path, str(second.path)).step == 200
    assert resolve(tmp_path, second.path.name).step == 200
    with pytest.raises(CheckpointNotFound, match=r"no checkpoint at step 150 \(steps available: 100, 200\)"):
        resolve(tmp_path, "150")
    with pytest.raises(CheckpointNotFound, match="not a checkpoint"):
        resolve(tmp_path, str(tmp_path))
    with pytest.raises(CheckpointNotFound, match="expected 'latest'"):
        resolve(tmp_path, "nonsense")


def test_rotation_keeps_the_newest(tmp_path):
    for step in range(1, 6):
        write(tmp_path, small_state(step), step, keep=10)
    deleted = rotate(tmp_path, keep=2)
    assert sorted(path.name for path in deleted) == [f"step-{step:012d}" for step in (1, 2, 3)]
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [4, 5]
    assert dot_entries(tmp_path) == []
    write(tmp_path, small_state(6), 6, keep=2)  # the write rotates too
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [5, 6]


def test_rotation_keeps_everything_while_there_are_fewer_than_keep(tmp_path):
    for step in range(1, 4):
        write(tmp_path, small_state(step), step, keep=3)
        assert [entry.step for entry in list_checkpoints(tmp_path)] == list(range(1, step + 1))
    assert rotate(tmp_path, keep=5) == []


def test_rotation_never_deletes_the_newest_verified(tmp_path):
    for step in range(1, 5):
        write(tmp_path, small_state(step), step, keep=10)
    for step in (3, 4):
        flip_last_byte(tmp_path / "checkpoints" / f"step-{step:012d}" / "arrays" / "frames.npy")
    rotate(tmp_path, keep=1)
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [2, 4]
    assert latest_verified(tmp_path).step == 2


def test_write_after_a_fallback_protects_itself_not_a_newer_corrupt_one(tmp_path):
    write(tmp_path, small_state(1), 100, keep=10)
    write(tmp_path, small_state(2), 200, keep=10)
    flip_last_byte(tmp_path / "checkpoints" / "step-000000000200" / "arrays" / "frames.npy")
    write(tmp_path, small_state(3), 150, keep=1)  # resumed from 100 and went on
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [150, 200]
    assert latest_verified(tmp_path).step == 150


def write_best(run_dir: Path, step: int, mean: float, *, keep: int = 2):
    return write(run_dir, small_state(step % 256), step, keep=keep, reason="best", evaluation_mean=mean)


def test_best_checkpoints_live_beside_the_newest_and_never_serve_a_resume(tmp_path):
    write(tmp_path, small_state(1), 100, keep=2)
    first_best = write_best(tmp_path, 100, 20.0)  # same step as an interval checkpoint: both stay
    write(tmp_path, small_state(2), 200, keep=2)
    write_best(tmp_path, 250, 35.5)
    write(tmp_path, small_state(3), 300, keep=2)
    write(tmp_path, small_state(4), 400, keep=2)
    names = [entry.path.name for entry in list_checkpoints(tmp_path)]
    # keep = 2 counts resumable checkpoints only; of the bests only the newest (and highest) stays.
    assert names == ["step-000000000250-best", "step-000000000300", "step-000000000400"]
    assert not first_best.path.exists()
    assert latest_verified(tmp_path).step == 400
    assert resolve(tmp_path, "latest").step == 400
    best = resolve(tmp_path, "best")
    assert (best.step, best.reason, best.evaluation_mean, best.label) == (250, "best", 35.5, "best (eval 35.5)")
    assert resolve(tmp_path, "250").reason == "best"


def test_rotation_keeps_the_highest_best_even_beside_a_newer_one(tmp_path):
    """After a resume from an older checkpoint, a new best may score below one of the discarded future."""
    write_best(tmp_path, 500, 90.0)
    write_best(tmp_path, 300, 80.0)
    write_best(tmp_path, 400, 85.0)
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [400, 500]  # 400: the last written
    assert resolve(tmp_path, "best").step == 500


def test_resolve_best_says_why_there_is_none(tmp_path):
    write(tmp_path, small_state(1), 100)
    with pytest.raises(CheckpointNotFound, match="no best checkpoint yet"):
        resolve(tmp_path, "best")
    write_best(tmp_path, 300, 12.0)
    write_best(tmp_path, 200, 10.0)  # written after a resume from step 100: both are kept
    flip_last_byte(tmp_path / "checkpoints" / "step-000000000300-best" / "arrays" / "frames.npy")
    assert resolve(tmp_path, "best").step == 200  # falls back to an older best that verifies
    flip_last_byte(tmp_path / "checkpoints" / "step-000000000200-best" / "arrays" / "frames.npy")
    with pytest.raises(CheckpointNotFound, match="no best checkpoint .* verifies"):
        resolve(tmp_path, "best")


def test_same_step_rewrite_replaces_the_old_checkpoint(tmp_path):
    write(tmp_path, small_state(1), 50, reason="interval")
    write(tmp_path, small_state(2), 50, reason="pause")
    entries = list_checkpoints(tmp_path)
    assert [(entry.step, entry.reason) for entry in entries] == [(50, "pause")]
    assert load_checkpoint(entries[0].path)[1]["counter"] == 2
    assert dot_entries(tmp_path) == []


def test_checkpoint_moved_aside_by_a_crashed_rewrite_is_restored(tmp_path, dead_pid):
    entry = write(tmp_path, small_state(1), 50)
    # A crash between "rename the old aside" and "rename the new in": only the aside copy exists.
    aside = entry.path.parent / f".old-{entry.path.name}-{dead_pid}-0abc"
    os.rename(entry.path, aside)
    (entry.path.parent / f".tmp-{entry.path.name}-{dead_pid}-0def").mkdir()
    assert list_checkpoints(tmp_path) == []
    rotate(tmp_path, keep=5)
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [50]
    assert verify(entry.path) is None and dot_entries(tmp_path) == []


def test_leftovers_of_live_writers_are_left_alone(tmp_path, dead_pid):
    write(tmp_path, small_state(1), 1)
    checkpoints = tmp_path / "checkpoints"
    alive = checkpoints / f".tmp-step-000000000002-{os.getppid()}-00aa"
    dead = checkpoints / f".deleting-step-000000000000-{dead_pid}-00bb"
    alive.mkdir()
    dead.mkdir()
    rotate(tmp_path, keep=5)
    assert dot_entries(tmp_path) == [alive.name]


AS_OTHER_USER = """
import ctypes, sys
from pathlib import Path
import tempfile
from checkpoint_testing import small_state, write
# A first write imports what a write imports lazily (torch.save's serialization module): as uid 65534 the
# interpreter could not read it from a venv under a 0700 directory, as CI's `mktemp -d` makes.
write(Path(tempfile.mkdtemp()), small_state(2), 2)
# From here on files are opened as uid 65534, without root's right to list what its owner cannot.
libc = ctypes.CDLL(None, use_errno=True)
libc.setfsgid(65534)
libc.setfsuid(65534)
write(Path(sys.argv[1]), small_state(2), 2)
"""


def test_an_unreadable_checkpoint_rewritten_at_its_step_leaves_no_directory_behind(tmp_path: Path) -> None:
    """A user's checkpoint made unreadable (chmod 000), rewritten by a resume at the same step: its .old- aside
    was left for ever, since rmtree cannot list it and every cleanup failed the same way (issue 23)."""
    run_dir = Path(tempfile.mkdtemp(dir="/tmp"))  # outside the test's 0700 tree, which uid 65534 cannot enter
    try:
        write(run_dir, small_state(1), 1)
        write(run_dir, small_state(2), 2)
        for path in (run_dir, *run_dir.rglob("*")):
            os.chown(path, 65534, 65534, follow_symlinks=False)
        (run_dir / "checkpoints" / "step-000000000002").chmod(0)
        tests = Path(__file__).parent.parent
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])}
        result = subprocess.run([sys.executable, "-c", AS_OTHER_USER, str(run_dir)], capture_output=True, text=True,
                                env=environment, timeout=120)
        assert result.returncode == 0, result.stderr
        assert dot_entries(run_dir) == []
        assert [entry.step for entry in list_checkpoints(run_dir)] == [1, 2]
    finally:
        for path in (run_dir, *run_dir.rglob("*")):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(run_dir)
