"""Run directories: only what rlsup creates is made private (issue 9: --run-dir chmodded a shared 1777 dir)."""
from __future__ import annotations

import stat
from pathlib import Path

from rlsup import paths
from rlsup.cli.training import start_run
from rlsup import spec as specs


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_existing_run_dir_keeps_its_permissions(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    run_dir = start_run(specs.JobSpec(), str(shared))
    assert run_dir == shared.resolve()
    assert mode(shared) == 0o1777
    assert (shared / paths.JOB_FILE).is_file()
    assert mode(shared / paths.SPEC_HISTORY) == 0o700  # made by rlsup: private


def test_directories_rlsup_creates_are_private_parents_included(tmp_path: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    existing.chmod(0o755)
    created = paths.ensure_private_dir(existing / "a" / "b")
    assert [mode(path) for path in (existing / "a", created)] == [0o700, 0o700]
    assert mode(existing) == 0o755
