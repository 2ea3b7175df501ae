"""A received run is data from a stranger (issue 23): a resume never writes through its links or reads a FIFO to EOF."""
from __future__ import annotations

import os
import shutil
import signal
import stat
from pathlib import Path

import pytest

from rlsup import atomic, paths
from rlsup.jobs.state import State
from rlsup.run import files as runfiles, lineage
from rlsup.checkpoint.manifest import MANIFEST_FILE, STATE_FILE, list_checkpoints, read_manifest, sealed
from rlsup_testing import assert_one_line_error, cartpole_job, copy_run as received, finished_cartpole, run_rlsup

OUTSIDE_BYTES = b"a colleague's file, not the run's\n" * 32_768  # about 1 MiB, as in the issue


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return finished_cartpole(tmp_path_factory, 2_000)


def outside_file(tmp_path: Path) -> Path:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(OUTSIDE_BYTES)
    return outside


@pytest.mark.parametrize("name", [paths.METRICS_FILE, paths.LOG_FILE, paths.WORKER_LOCK])
def test_a_resume_refuses_a_run_file_linked_outside_and_leaves_the_target_alone(
        tmp_path: Path, finished_run: Path, name: str) -> None:
    run_dir, outside = received(finished_run, tmp_path), outside_file(tmp_path)
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(outside)
    result = run_rlsup("run", "--resume", run_dir, timeout=120)
    assert_one_line_error(result, 2, name, "link")
    assert outside.read_bytes() == OUTSIDE_BYTES


def test_a_resume_refuses_a_run_file_hard_linked_to_a_file_outside(tmp_path: Path, finished_run: Path) -> None:
    run_dir, outside = received(finished_run, tmp_path), outside_file(tmp_path)
    (run_dir / paths.METRICS_FILE).unlink()
    os.link(outside, run_dir / paths.METRICS_FILE)
    result = run_rlsup("run", "--resume", run_dir, timeout=120)
    assert_one_line_error(result, 2, paths.METRICS_FILE, "hard link")
    assert outside.read_bytes() == OUTSIDE_BYTES


def test_a_resume_never_creates_the_target_of_a_dangling_link(tmp_path: Path, finished_run: Path) -> None:
    run_dir = received(finished_run, tmp_path)
    target = tmp_path / "created-by-rlsup.log"
    (run_dir / paths.LOG_FILE).unlink()
    (run_dir / paths.LOG_FILE).symlink_to(target)
    result = run_rlsup("run", "--resume", run_dir, timeout=120)
    assert_one_line_error(result, 2, paths.LOG_FILE)
    assert not target.exists()


def test_a_foreground_run_keeps_its_metrics_and_log_private(finished_run: Path) -> None:
    for name in (paths.METRICS_FILE, paths.LOG_FILE):
        assert stat.S_IMODE((finished_run / name).stat().st_mode) == 0o600, name


def resealed_with_empty(checkpoint: Path, name: str) -> None:
    """The manifest says name holds 0 bytes, and its own checksum agrees: what a stranger can write."""
    manifest = read_manifest(checkpoint)
    manifest["files"][name]["bytes"] = 0
    atomic.write_json(checkpoint / MANIFEST_FILE, sealed(manifest))


def fifo(path: Path) -> None:
    os.mkfifo(path)


def zero_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


@pytest.mark.parametrize("command", [("checkpoints", "--verify"), ("run", "--resume"), ("enjoy", "--episodes", "1")])
@pytest.mark.parametrize("plant", [fifo, zero_link])
def test_a_fifo_or_device_in_a_checkpoint_is_refused_not_read(tmp_path: Path, finished_run: Path, command: tuple,
                                                              plant) -> None:
    run_dir = received(finished_run, tmp_path)
    for entry in list_checkpoints(run_dir):
        (entry.path / STATE_FILE).unlink()
        plant(entry.path / STATE_FILE)
        resealed_with_empty(entry.path, STATE_FILE)
    result = run_rlsup(*command, run_dir, timeout=60)  # before: read for ever
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (1, 2), (result.stdout, result.stderr)
    assert STATE_FILE in result.stdout + result.stderr


def test_the_daemon_never_appends_a_workers_output_through_a_linked_log(harness, tmp_path: Path) -> None:
    harness.settings()
    harness.start_daemon()
    job = harness.submit(harness.job_file("linked", total_steps=400_000, checkpoint_every=0))
    harness.wait_step(job.id, 300)
    assert harness.cli("pause", str(job.id))[0] == 0
    harness.wait_state(job.id, State.PAUSED)
    run_dir, outside = Path(job.run_dir), outside_file(tmp_path)
    (run_dir / paths.LOG_FILE).unlink()
    (run_dir / paths.LOG_FILE).symlink_to(outside)
    assert harness.cli("resume", str(job.id))[0] == 0
    failed = harness.wait_state(job.id, State.FAILED)
    assert f"{run_dir / paths.LOG_FILE} is a symbolic link" in failed.reason, harness.report(job.id)
    assert outside.read_bytes() == OUTSIDE_BYTES and (run_dir / paths.LOG_FILE).is_symlink()


def test_a_job_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, finished_run: Path) -> None:
    os.mkfifo(tmp_path / "job.toml")
    result = run_rlsup("validate", tmp_path / "job.toml", timeout=30)  # before: waited for a writer for ever
    assert_one_line_error(result, 2, "job.toml", "not a regular file")
    run_dir = received(finished_run, tmp_path)
    (run_dir / paths.JOB_FILE).unlink()
    os.mkfifo(run_dir / paths.JOB_FILE)
    assert_one_line_error(run_rlsup("run", "--resume", run_dir, timeout=60), 2)  # not taken for a run at all


def test_a_worker_log_swapped_for_a_link_is_neither_stored_in_a_reason_nor_shown(harness, tmp_path: Path) -> None:
    """Issue 49 item 10: a worker.log replaced by a link to a secret while its worker trained was quoted, through
    the link, into the failed job's stored reason and printed by `rlsup logs`."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the secret of somebody else\n")
    harness.start_daemon()
    job = harness.submit(harness.job_file("swapped", total_steps=400_000, checkpoint_every=0, max_restarts=0))
    status = harness.wait_step(job.id, 300)
    log = Path(job.run_dir) / paths.LOG_FILE
    log.unlink()
    log.symlink_to(secret)
    os.kill(status.pid, signal.SIGKILL)  # the worker the daemon started for this test's job: a crash, failed
    failed = harness.wait_state(job.id, State.FAILED)
    assert "secret" not in failed.reason, failed.reason
    code, out, err = harness.cli("logs", str(job.id))
    assert "secret" not in out and code == 2 and f"{log} is a symbolic link" in err, (code, out, err)


def a_fork_of(parent_run: Path, directory: Path) -> Path:
    """A fork run of parent_run's newest checkpoint, made as `rlsup fork` makes one, with 200 steps to train."""
    entry = lineage.resolve_checkpoint(parent_run, "latest")
    spec = runfiles.read_run_spec(parent_run)
    spec = spec.replace("job", name="forked", total_steps=entry.step + 200)
    run_dir = directory / "fork"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, spec)
    lineage.prepare_fork(run_dir, lineage.ForkRequest(parent_run, spec.job.name, None, entry), spec)
    return run_dir


def test_a_received_forks_parent_checkpoint_linked_outside_it_is_refused(tmp_path: Path, finished_run: Path) -> None:
    """Issue 49 item 11: a fork's parent-checkpoint/ that is a link to a checkpoint outside the run was followed,
    and the received fork trained on from it."""
    parent = received(finished_run, tmp_path)
    fork = a_fork_of(parent, tmp_path)
    inherited = fork / paths.INHERITED_CHECKPOINT
    shutil.rmtree(inherited)
    inherited.symlink_to(lineage.resolve_checkpoint(parent, "latest").path)  # a checkpoint outside the fork
    result = run_rlsup("run", "--resume", fork, timeout=120)
    assert_one_line_error(result, 2, paths.INHERITED_CHECKPOINT, "symbolic link")
    assert list_checkpoints(fork) == []


def linked_job_file(run_dir: Path) -> str:
    """job.toml made a link to a copy of itself outside the run: a valid job, read only by following the link."""
    outside = run_dir.parent / "elsewhere.toml"
    outside.write_bytes((run_dir / paths.JOB_FILE).read_bytes())
    (run_dir / paths.JOB_FILE).unlink()
    (run_dir / paths.JOB_FILE).symlink_to(outside)
    return "is a symbolic link"


def huge_job_file(run_dir: Path) -> str:
    with open(run_dir / paths.JOB_FILE, "r+b") as handle:
        handle.truncate(2 << 30)  # sparse, as in the issue: no disk used
    return "is larger than 16 MiB"


RUN_SPEC_READERS = {"enjoy": ("enjoy", "--episodes", "1"), "fork": ("fork",), "resume": ("run", "--resume"),
                    "export": ("export", "--format", "torchscript")}


@pytest.mark.parametrize("plant", [linked_job_file, huge_job_file])
@pytest.mark.parametrize("command", list(RUN_SPEC_READERS))
def test_a_received_runs_job_file_is_read_only_as_its_own_small_file(tmp_path: Path, finished_run: Path, command: str,
                                                                       plant) -> None:
    """Issue 49 items 14 and 16: every command that reads a run's job.toml refuses one that is a link, or larger
    than a run's JSON files may be, in one line naming it, before reading it (a 2 GiB one was held whole)."""
    run_dir = received(finished_run, tmp_path)
    said = plant(run_dir)
    arguments = [*RUN_SPEC_READERS[command], run_dir]
    if command == "fork":
        arguments.append(cartpole_job(tmp_path, name="new", total_steps=4_000, checkpoint_every=500))
    if command == "export":
        arguments += ["--out", tmp_path / "model.pt"]
    assert_one_line_error(run_rlsup(*arguments, timeout=120), 2, str(run_dir / paths.JOB_FILE), said)
