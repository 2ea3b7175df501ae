"""The trust rule of a run's import-paths.json against a hostile run directory: only entries this home sealed,
or that the user trusts, absolute and outside the run, reach sys.path; the file is read as data from a stranger."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from rlsup import paths
from rlsup.run import import_trust


@pytest.fixture
def isolated_path(monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv(import_trust.HANDED_DOWN, raising=False)


@pytest.fixture
def run_dir(tmp_path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    return run


@pytest.fixture
def theirs(tmp_path) -> Path:
    directory = tmp_path / "theirs"
    directory.mkdir()
    return directory


def write(run_dir: Path, record: object) -> None:
    (run_dir / paths.IMPORT_PATHS).write_text(json.dumps(record))


def test_entries_this_home_sealed_are_used_and_nothing_is_said(run_dir, theirs, isolated_path):
    import_trust.write_import_paths(run_dir, [str(theirs)])
    assert import_trust.use_import_paths(run_dir) == ([str(theirs)], None)
    assert sys.path[-1] == str(theirs)


@pytest.mark.parametrize("seal", [None, "0" * 64, 5])
def test_an_unsealed_or_forged_file_is_used_only_when_trusted(seal, run_dir, theirs, isolated_path):
    write(run_dir, {"sys_path": [str(theirs)], "seal": seal})
    added, said = import_trust.use_import_paths(run_dir)
    assert added == [] and str(theirs) not in sys.path
    assert str(run_dir) in said and "--trust-imports" in said and "\n" not in said
    assert import_trust.use_import_paths(run_dir, trust=True) == ([str(theirs)], None)


def test_a_sealed_entry_now_owned_by_another_user_is_left_out(run_dir, theirs, isolated_path):
    """As a directory in /tmp that vanished and was made again by someone else: it is not what was sealed."""
    entries, owners = [str(theirs)], [os.getuid() + 1]  # recorded as another user's: as if it changed hands
    key = import_trust.home_key(create=True)
    write(run_dir, {"sys_path": entries, "owners": owners, "seal": import_trust.seal(key, entries, owners)})
    added, said = import_trust.use_import_paths(run_dir)
    assert added == [] and "owned by another user" in said


def test_a_file_sealed_by_another_home_is_not_this_users(run_dir, theirs, isolated_path, tmp_path, monkeypatch):
    monkeypatch.setenv("RLSUP_HOME", str(tmp_path / "another-home"))
    import_trust.write_import_paths(run_dir, [str(theirs)])
    monkeypatch.setenv("RLSUP_HOME", str(tmp_path / "my-home"))
    assert import_trust.home_key(create=True)  # this home has a key of its own
    added, said = import_trust.use_import_paths(run_dir)
    assert added == [] and "--trust-imports" in said


def test_a_key_others_can_read_seals_nothing(run_dir, theirs, isolated_path, rlsup_home):
    import_trust.write_import_paths(run_dir, [str(theirs)])
    os.chmod(rlsup_home / paths.IMPORT_KEY, 0o640)
    added, said = import_trust.use_import_paths(run_dir)
    assert added == [] and "--trust-imports" in said


def test_the_run_the_cwd_and_relative_or_odd_entries_never_reach_sys_path(run_dir, theirs, isolated_path, tmp_path,
                                                                         monkeypatch):
    (run_dir / "sub").mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.chdir(tmp_path)
    entries = [str(run_dir), str(run_dir / "sub"), f"{theirs}/../run", "theirs", "../theirs", "", "/dev/zero",
               str(fifo), str(tmp_path / "missing"), f"{theirs}/../theirs"]
    entries.append(str(tmp_path / "alias"))
    (tmp_path / "alias").symlink_to(run_dir)
    import_trust.write_import_paths(run_dir, entries)
    sys.path[:0] = ["", str(run_dir), f"{run_dir}/sub/.."]  # as `-m` in the run, or a PYTHONPATH naming it
    added, said = import_trust.use_import_paths(run_dir, trust=True)
    assert added == [f"{theirs}/../theirs"]  # an absolute path with '..' outside the run is still a path
    assert "left out" in said and "\n" not in said
    assert not [entry for entry in sys.path if entry in ("", "theirs", "../theirs") or "run" in Path(entry).parts]


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "{", '{"sys_path": "/tmp"}', '{"sys_path": {"a": 1}}',
                                     "\udcff", '{"sys_path": null}'])
def test_a_file_that_is_not_a_list_of_entries_adds_nothing(content, run_dir, isolated_path):
    (run_dir / paths.IMPORT_PATHS).write_bytes(content.encode("utf-8", "surrogateescape"))
    before = list(sys.path)
    added, said = import_trust.use_import_paths(run_dir, trust=True)
    assert added == [] and sys.path == before
    assert said is None or "\n" not in said


def test_a_linked_huge_or_fifo_file_is_refused_unread(run_dir, theirs, isolated_path, tmp_path):
    sealed = tmp_path / "sealed-run"
    sealed.mkdir()
    import_trust.write_import_paths(sealed, [str(theirs)])
    (run_dir / paths.IMPORT_PATHS).symlink_to(sealed / paths.IMPORT_PATHS)  # a sealed file of this user's
    added, said = import_trust.use_import_paths(run_dir, trust=True)
    assert added == [] and "cannot be opened" in said

    (run_dir / paths.IMPORT_PATHS).unlink()
    with open(run_dir / paths.IMPORT_PATHS, "w") as handle:
        handle.write(json.dumps({"sys_path": [str(theirs)] * 10_000}))
    added, said = import_trust.use_import_paths(run_dir, trust=True)
    assert added == [] and "at most 64 KiB" in said

    (run_dir / paths.IMPORT_PATHS).unlink()
    os.mkfifo(run_dir / paths.IMPORT_PATHS)  # opened for reading, it would wait for a writer for ever
    added, said = import_trust.use_import_paths(run_dir, trust=True)
    assert added == [] and "not a regular file" in said


def test_children_get_the_trusted_entries_and_a_python_path_without_the_run(run_dir, theirs, isolated_path,
                                                                            monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(run_dir), str(theirs), f"{run_dir}/x", ""]))
    import_trust.hand_down(run_dir, [str(theirs)])
    assert os.environ["PYTHONPATH"] == str(theirs)
    import_trust.take_handed_down()
    assert sys.path[-1] == str(theirs)


def test_a_fork_carries_its_parents_recorded_owners_and_never_vouches_for_a_new_one(run_dir, theirs, isolated_path,
                                                                                    tmp_path):
    """Issue 49 item 1: a PBT fork's import-paths.json (hand_on, from pbt_generations.prepare) said the module
    directory's owner as it was at the fork, so one replaced by another user's was sealed for the fork's worker."""
    if os.getuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    (theirs / "payload_env.py").write_text("raise SystemExit('imported')\n")
    import_trust.write_import_paths(run_dir, [str(theirs)])  # the parent's submit: the directory is this user's
    os.chown(theirs, 65534, 65534)  # since then, the directory became another user's (made again in /tmp, say)
    fork = tmp_path / "fork"
    fork.mkdir()
    import_trust.hand_on(run_dir, fork)
    recorded = json.loads((fork / paths.IMPORT_PATHS).read_text())
    assert recorded["owners"] == [os.getuid()], recorded  # the parent's owner, not the directory's now
    added, said = import_trust.use_import_paths(fork)
    assert added == [] and str(theirs) not in sys.path and "owned by another user" in said
    assert importlib.util.find_spec("payload_env") is None
    os.chown(theirs, os.getuid(), os.getgid())  # given back: the fork's entry is the parent's again
    assert import_trust.use_import_paths(fork) == ([str(theirs)], None)


def test_a_fork_of_a_parent_whose_entry_changed_hands_leaves_it_out_too(run_dir, theirs, isolated_path, tmp_path):
    """Issue 49 item 1 without root: the parent recorded another owner than the directory's now, so the fork's
    worker must refuse the entry as the parent's does, whoever owns it at the fork."""
    entries, owners = [str(theirs)], [os.getuid() + 1]
    key = import_trust.home_key(create=True)
    write(run_dir, {"sys_path": entries, "owners": owners, "seal": import_trust.seal(key, entries, owners)})
    fork = tmp_path / "fork"
    fork.mkdir()
    import_trust.hand_on(run_dir, fork)
    added, said = import_trust.use_import_paths(fork)
    assert added == [] and "owned by another user" in said
