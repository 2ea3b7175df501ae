"""The daemon's warm start: a forked worker is the worker a fresh interpreter would be, and no fault of its fork
server (killed while importing, stuck, killed, stale, its daemon killed) loses a worker's end or a start."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from rlsup import paths
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs.state import State
from rlsup.run.fork_protocol import FORK_SERVER_FLAG

SERVER_LAUNCHED = re.compile(r"warm start: fork server pid (\d+) importing")


def open_links(pid: int) -> dict[int, str]:
    links = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            links[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue  # closed meanwhile
    return links


def final_fingerprint(run_dir: str | Path) -> str:
    return list_checkpoints(Path(run_dir))[-1].fingerprint


def cold_reference(harness, run_dir: str, reference: Path) -> str:
    """The same run trained by a fresh `python -m rlsup.worker`, as a daemon without a warm start runs it."""
    reference.mkdir()
    shutil.copyfile(Path(run_dir) / paths.JOB_FILE, reference / paths.JOB_FILE)
    subprocess.run([sys.executable, "-P", "-m", "rlsup.worker", str(reference)], cwd=harness.home, check=True,
                   env={**os.environ, "RLSUP_HOME": str(harness.home), "CUDA_VISIBLE_DEVICES": ""},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return final_fingerprint(reference)


def gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_forked_worker_starts_as_a_fresh_one_would_and_an_install_meanwhile_starts_the_next_cold(
        harness, tmp_path) -> None:
    installed = tmp_path / "site"
    installed.mkdir()
    harness.extra_environment["PYTHONPATH"] = str(installed)
    harness.settings()
    first = harness.submit(harness.job_file("first", total_steps=4_000))
    daemon = harness.start_daemon()
    worker = psutil.Process(harness.wait_step(first.id, 1).pid)
    server = worker.parent()
    # Forked by the daemon's server, in a session of its own, with the job's environment, cwd and output.
    assert FORK_SERVER_FLAG in server.cmdline() and server.ppid() == daemon.pid
    assert os.getsid(worker.pid) == worker.pid and worker.cwd() == str(harness.home)
    log = str(Path(first.run_dir) / paths.LOG_FILE)
    links = open_links(worker.pid)
    assert (links[0], links[1], links[2]) == (os.devnull, log, log)
    assert not [link for link in links.values() if link.startswith("socket:")], links  # not the server's channel
    done = harness.wait_state(first.id, State.DONE)
    # Its own environment, not the server's that /proc/PID/environ shows a fork (the server sees no GPU either).
    assert f"(pid {worker.pid}; CUDA_VISIBLE_DEVICES='')" in Path(log).read_text()
    assert final_fingerprint(done.run_dir) == cold_reference(harness, done.run_dir, tmp_path / "cold")

    # A package installed under the running server: the next worker starts cold, as that server's modules may
    # no longer be the installed ones, and the daemon says so.
    (installed / "fresh_module.py").write_text("")
    second = harness.submit(harness.job_file("second", total_steps=1_000))
    harness.wait_state(second.id, State.DONE)
    log_text = harness.daemon_log()
    assert "refused a worker: the installed code changed since the fork server started" in log_text, log_text
    assert re.search(rf"job {second.id}: spawned worker pid \d+ \(gpus none\)", log_text), log_text
    # The stale server, retired, leaves once its workers are reported, and the daemon reaps it.
    harness.wait_for(lambda: not psutil.pid_exists(server.pid), timeout=30, what="the retired server to be reaped")


def test_a_workers_end_is_known_when_its_server_dies_importing_sticks_or_dies_and_its_daemon_is_killed(
        harness) -> None:
    harness.settings()
    job = harness.submit(harness.job_file("long", total_steps=1_000_000))
    harness.start_daemon()
    # Killed while it imports: another is launched, and the job starts from it.
    importing = harness.wait_for(lambda: SERVER_LAUNCHED.search(harness.daemon_log()), timeout=30,
                                 what="the fork server's launch", report=harness.report)
    os.kill(int(importing.group(1)), signal.SIGKILL)
    worker = psutil.Process(harness.wait_step(job.id, 100).pid)
    server = worker.parent()
    assert FORK_SERVER_FLAG in server.cmdline() and server.pid != int(importing.group(1))

    # Stuck, it cannot reap: the pause is settled from exit.json once the worker has been dead a while.
    os.kill(server.pid, signal.SIGSTOP)
    try:
        assert harness.cli("pause", str(job.id))[0] == 0
        paused = harness.wait_state(job.id, State.PAUSED, timeout=60)
    finally:
        os.kill(server.pid, signal.SIGKILL)
    assert paused.exit_code == 75, harness.report(job.id)

    # Dead, it is replaced at the next start.
    assert harness.cli("resume", str(job.id))[0] == 0
    resumed = psutil.Process(harness.wait_step(job.id, paused.step + 100).pid)
    new_server = resumed.parent()
    assert FORK_SERVER_FLAG in new_server.cmdline() and new_server.pid != server.pid

    # Its daemon killed, the server leaves (its channel closed) and the worker trains on, to be adopted.
    harness.kill_daemon()
    harness.wait_for(lambda: gone(new_server), timeout=30, what="the orphaned fork server to leave")
    assert resumed.is_running() and not gone(resumed)
    harness.start_daemon()
    adopted = harness.wait_step(job.id, harness.job(job.id).step + 100)
    assert adopted.pid == resumed.pid
    assert harness.cli("pause", str(job.id))[0] == 0
    assert harness.wait_state(job.id, State.PAUSED, timeout=60).exit_code == 75


# A broken install as only the fork server meets it: Python runs sitecustomize in every interpreter, and this one
# makes torch unimportable where the command line names the fork server, as a half-upgraded install would.
BROKEN_FOR_THE_SERVER = f'''
import sys
if {FORK_SERVER_FLAG!r} in sys.argv:
    class BrokenTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch":
                raise ImportError("torch is half-installed")
            return None
    sys.meta_path.insert(0, BrokenTorch())
'''


def test_a_server_that_cannot_import_turns_the_warm_start_off_and_every_job_starts_cold(harness, tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BROKEN_FOR_THE_SERVER)
    harness.extra_environment["PYTHONPATH"] = str(site)
    harness.settings()
    first = harness.submit(harness.job_file("first", total_steps=1_000))
    second = harness.submit(harness.job_file("second", total_steps=1_000))
    daemon = harness.start_daemon()
    for job in (first, second):
        assert harness.wait_state(job.id, State.DONE).exit_code == 0, harness.report(job.id)
    log_text = harness.daemon_log()
    assert ("warm start off: the fork server could not import: cannot import torch: ImportError: torch is "
            "half-installed; workers start cold") in log_text, log_text
    # Off for the daemon's life: one server launched, and each job's worker spawned by the daemon itself.
    assert len(SERVER_LAUNCHED.findall(log_text)) == 1, log_text
    for job in (first, second):
        assert re.search(rf"job {job.id}: spawned worker pid \d+ \(gpus none\)", log_text), log_text
    harness.wait_for(lambda: not [child for child in psutil.Process(daemon.pid).children()
                                  if FORK_SERVER_FLAG in child.cmdline()], timeout=30, what="the server reaped")


def test_a_server_that_never_answers_a_fork_is_killed_and_the_job_starts_from_a_new_one(harness) -> None:
    harness.settings()
    first = harness.submit(harness.job_file("first", total_steps=1_000))
    harness.start_daemon()
    harness.wait_state(first.id, State.DONE)
    server = int(SERVER_LAUNCHED.search(harness.daemon_log()).group(1))
    os.kill(server, signal.SIGSTOP)  # ready and serving, then deaf: the next fork request gets no answer
    try:
        second = harness.submit(harness.job_file("second", total_steps=5_000))
        worker = psutil.Process(harness.wait_step(second.id, 100, timeout=90).pid)
    finally:
        if psutil.pid_exists(server):
            os.kill(server, signal.SIGKILL)
    log_text = harness.daemon_log()
    assert re.search(rf"fork server pid {server} retired: it did not answer within 10 s while forking a worker",
                     log_text), log_text
    new_server = worker.parent()
    assert FORK_SERVER_FLAG in new_server.cmdline() and new_server.pid != server
    harness.wait_for(lambda: not psutil.pid_exists(server), timeout=30, what="the deaf server to be reaped")
    assert harness.wait_state(second.id, State.DONE, timeout=120).exit_code == 0, harness.report(second.id)
    # One worker only: the job was not started twice, though the daemon could not know whether it had been.
    assert len(re.findall(rf"job {second.id}: spawned worker pid", log_text)) <= 1, log_text
