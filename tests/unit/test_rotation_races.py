"""Reading a run while its worker rotates checkpoints away (keep = 1): never a traceback, and latest is found (issue 23)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import pytest

from checkpoint_testing import small_state, write
from rlsup import enjoy, paths, spec as specs
from rlsup.run import lineage
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup_testing import cartpole_job

TRIES = 60


@pytest.fixture
def rotating_run(tmp_path: Path) -> Iterator[Path]:
    """A run whose checkpoints a thread keeps writing with keep = 1, as a training worker does."""
    run_dir = tmp_path / "parent"
    run_dir.mkdir()
    (run_dir / paths.JOB_FILE).write_text(cartpole_job(tmp_path, total_steps=10_000_000).read_text())
    write(run_dir, {"trainer": small_state(1)}, 1, keep=1)
    stop = threading.Event()

    def rotate() -> None:
        step = 2
        while not stop.is_set():
            write(run_dir, {"trainer": small_state(step)}, step, keep=1)
            step += 1

    rotator = threading.Thread(target=rotate, daemon=True)
    rotator.start()
    yield run_dir
    stop.set()
    rotator.join(timeout=30)


def test_latest_of_a_rotating_run_always_loads(rotating_run: Path) -> None:
    for _ in range(TRIES):  # before: FileNotFoundError, or a 'missing' file refused, within a few tries
        _, trainer_state, entry = enjoy.read_trainer_state(rotating_run, "latest")
        assert int(trainer_state["counter"]) == entry.step


def test_a_fork_of_latest_of_a_rotating_run_is_made(rotating_run: Path, tmp_path: Path) -> None:
    fork_spec = specs.load(rotating_run / paths.JOB_FILE)
    for attempt in range(TRIES // 3):  # before: refused most of the time ('went away while forking')
        fork_dir = tmp_path / f"fork-{attempt}"
        fork_dir.mkdir()
        entry = lineage.resolve_checkpoint(rotating_run, "latest")
        request = lineage.ForkRequest(rotating_run, "parent", None, entry, latest=True)
        parent = lineage.prepare_fork(fork_dir, request, fork_spec)
        inherited = list_checkpoints(fork_dir)  # the fork's own checkpoints: none yet
        assert inherited == [] and parent.step >= entry.step
        assert (fork_dir / paths.INHERITED_CHECKPOINT / "manifest.json").is_file()
