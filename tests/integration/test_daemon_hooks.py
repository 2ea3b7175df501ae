"""daemon.toml hooks with a real daemon: once per transition with the job's variables, killed at their timeout."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from rlsup import paths
from rlsup.run.status import read_worker_status
from rlsup.daemon import hooks
from rlsup.jobs.state import State


def recording_hook(directory: Path) -> str:
    """A hook that leaves one file per run holding its RLSUP_ variables (renamed into place whole)."""
    return (f"env | grep ^RLSUP_ | sort > {directory}/.partial-$$ && "
            f"mv {directory}/.partial-$$ {directory}/hook-$$")


def hook_runs(directory: Path) -> dict[tuple[int, str], list[dict[str, str]]]:
    """(job id, state) -> the variables of each run of a hook for it."""
    runs: dict[tuple[int, str], list[dict[str, str]]] = {}
    for path in directory.glob("hook-*"):
        variables = dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
        runs.setdefault((int(variables["RLSUP_JOB_ID"]), variables["RLSUP_JOB_STATE"]), []).append(variables)
    return runs


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_hooks_run_once_per_transition_with_the_jobs_variables(harness, tmp_path) -> None:
    record = tmp_path / "hooks"
    record.mkdir()
    command = recording_hook(record)
    harness.settings(cpu_jobs=3, on_done=command, on_failed=command, on_paused=command, hook_timeout_s=60)
    finishes = harness.submit(harness.job_file("finishes", total_steps=1_500))
    breaks = harness.submit(harness.job_file("breaks", total_steps=1_500))
    long = harness.submit(harness.job_file("long", total_steps=1_000_000))
    # A run whose job.toml no longer parses: its worker exits 2 and the job fails, never retried.
    (Path(breaks.run_dir) / paths.JOB_FILE).write_text("[job]\ntotal_steps = -1\n")
    harness.start_daemon()

    harness.wait_step(long.id, 300)
    assert harness.cli("pause", str(long.id))[0] == 0
    done = harness.wait_state(finishes.id, State.DONE)
    failed = harness.wait_state(breaks.id, State.FAILED)
    paused = harness.wait_state(long.id, State.PAUSED)
    wanted = {(finishes.id, "done"), (breaks.id, "failed"), (long.id, "paused")}
    runs = harness.wait_for(lambda: (found := hook_runs(record)).keys() >= wanted and found, timeout=60,
                            what="the three hooks' records", report=harness.report)

    (on_done,), (on_failed,), (on_paused,) = (runs[key] for key in sorted(wanted, key=lambda key: key[0]))
    assert {key: on_done[key] for key in ("RLSUP_JOB_NAME", "RLSUP_JOB_STEP", "RLSUP_RUN_DIR")} == {
        "RLSUP_JOB_NAME": "finishes", "RLSUP_JOB_STEP": "1500", "RLSUP_RUN_DIR": done.run_dir}
    assert float(on_done["RLSUP_LAST_RETURN"]) == read_worker_status(Path(done.run_dir)).mean_return
    assert on_done["RLSUP_JOB_REASON"] == "budget reached at step 1500"
    assert (on_failed["RLSUP_JOB_NAME"], on_failed["RLSUP_JOB_STEP"], on_failed["RLSUP_LAST_RETURN"]) == (
        "breaks", "0", "")  # it never trained: no return to report
    assert "exit code 2" in on_failed["RLSUP_JOB_REASON"] and failed.run_dir == on_failed["RLSUP_RUN_DIR"]
    assert (on_paused["RLSUP_JOB_NAME"], int(on_paused["RLSUP_JOB_STEP"])) == ("long", paused.step)
    assert float(on_paused["RLSUP_LAST_RETURN"]) == read_worker_status(Path(paused.run_dir)).mean_return

    # A new daemon adopts the recorded states without running their hooks again; its own transitions run theirs.
    harness.kill_daemon()
    harness.start_daemon()
    after = harness.submit(harness.job_file("after", total_steps=1_500))
    harness.wait_state(after.id, State.DONE)
    runs = harness.wait_for(lambda: (found := hook_runs(record)).get((after.id, "done")) and found, timeout=60,
                            what="the new daemon's hook", report=harness.report)
    assert sorted((key, len(values)) for key, values in runs.items()) == sorted(
        (key, 1) for key in wanted | {(after.id, "done")})
    # daemon.log has each hook's start, and the end of the new daemon's. The first daemon was killed as soon as
    # its hooks had written their records, so whether it had reaped and logged their ends is a race (CI saw
    # one end of three logged): only their starts, logged as each is spawned, are certain.
    ended = re.compile(rf"job {after.id}: on_done hook \(pid \d+\) exited 0 after")
    log = harness.wait_for(lambda: ended.search(text := harness.daemon_log()) and text,
                           timeout=30, what="the last hook's end in daemon.log")
    started = re.findall(r"job (\d+): on_(\w+) hook \(pid \d+\) started: ", log)
    assert sorted((int(job_id), key) for job_id, key in started) == sorted(wanted | {(after.id, "done")}), log


def test_a_hanging_hook_is_killed_at_its_timeout_and_never_holds_the_daemon(harness, tmp_path) -> None:
    pids = tmp_path / "hung-pids"
    # The shell starts a child and waits for it: the kill must take the whole process group. The timeout
    # is time the test waits idle; the pause below settles within it with room to spare (about 1 s here
    # on 2 busy cores), and the test fails loudly, never passes wrongly, if it ever did not.
    harness.settings(cpu_jobs=2, hook_timeout_s=8, on_done=f"sleep 600 & echo $! >> {pids}; wait")
    quick = harness.submit(harness.job_file("quick", total_steps=1_500))
    long = harness.submit(harness.job_file("long", total_steps=1_000_000))
    harness.start_daemon()
    harness.wait_state(quick.id, State.DONE)
    sleeper = int(harness.wait_for(lambda: pids.exists() and pids.read_text().strip(), timeout=60,
                                   what="the hook to start", report=harness.report))

    # While the hook hangs, the loop goes on: a pause reaches the other job's worker and settles.
    harness.wait_step(long.id, 300)
    assert harness.cli("pause", str(long.id))[0] == 0
    harness.wait_state(long.id, State.PAUSED)
    assert alive(sleeper), "the hook ended before the daemon had shown it was not waiting for it"

    harness.wait_for(lambda: not alive(sleeper), timeout=90, what="the hook's child to be killed",
                     report=harness.report)
    log = harness.wait_for(lambda: "killed by signal 9" in (text := harness.daemon_log())
                           and text, timeout=30, what="the hook's end in daemon.log")
    assert f"job {quick.id}: on_done hook (pid" in log and "killed at its timeout of 8 s" in log
    assert harness.daemons[-1].poll() is None
    assert harness.cli("resume", str(long.id))[0] == 0
    harness.wait_state(long.id, State.RUNNING)


def test_a_bad_hook_setting_is_refused_naming_the_key(harness) -> None:
    environment = {**os.environ, "RLSUP_HOME": str(harness.home)}
    for text, words in (('on_finish = "true"\n', "on_finish: unknown setting"),
                        ("on_done = 5\n", "on_done: must be a string"),
                        ("hook_timeout_s = -1\n", "hook_timeout_s: must be at least 0.1")):
        (harness.home / paths.DAEMON_SETTINGS).write_text(text)
        result = subprocess.run([sys.executable, "-m", "rlsup.daemon"], env=environment, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert words in result.stderr and str(harness.home / paths.DAEMON_SETTINGS) in result.stderr


def failing_job(harness):
    """A job whose run's job.toml no longer parses: its worker exits 2 at once and the job fails."""
    job = harness.submit(harness.job_file("breaks", total_steps=1_500))
    (Path(job.run_dir) / paths.JOB_FILE).write_text("[job]\ntotal_steps = -1\n")
    return job


def bytes_held_under(pid: int, directory: Path) -> int:
    """The sizes of the files under directory that process pid holds open (deleted ones too)."""
    total = 0
    for descriptor in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{descriptor}").startswith(str(directory)):
                total += os.stat(f"/proc/{pid}/fd/{descriptor}").st_size
    return total


def test_a_flooding_hook_keeps_only_a_bounded_tail_of_its_output(harness, tmp_path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    harness.extra_environment["TMPDIR"] = str(temporary)
    harness.settings(on_failed="yes flood-line", hook_timeout_s=3)
    failing_job(harness)
    daemon = harness.start_daemon()
    ended = re.compile(r"on_failed hook \(pid \d+\) killed by signal 9")
    held = []

    def flood_ended():
        held.append(bytes_held_under(daemon.pid, temporary))
        return ended.search(harness.daemon_log())
    harness.wait_for(flood_ended, timeout=90, what="the flooding hook's end", report=harness.report)
    # The flood went on until its timeout, and the daemon held no more of it than the tail it logs.
    assert max(held) <= 1024 * 1024, f"the daemon held {max(held)} bytes of hook output under $TMPDIR"
    output = [line.partition("output: ")[2] for line in harness.daemon_log().splitlines() if "output: " in line]
    assert output and all(line and line in "flood-line" for line in output), output[:5]  # the first one cut
    assert sum(len(line) + 1 for line in output) <= hooks.OUTPUT_LOGGED_BYTES


def test_a_hook_whose_daemon_was_killed_still_ends_at_its_timeout(harness, tmp_path) -> None:
    pid_file = tmp_path / "hook-pid"
    harness.settings(on_failed=f"echo $$ > {pid_file}.partial && mv {pid_file}.partial {pid_file} && exec sleep 600",
                     hook_timeout_s=5)
    failing_job(harness)
    harness.start_daemon()
    hook = int(harness.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=60,
                                what="the hook to start", report=harness.report))
    harness.kill_daemon()
    assert "killed at its timeout" not in harness.daemon_log(), \
        "the daemon outlived the hook's timeout: this test shows nothing"
    try:
        harness.wait_for(lambda: not alive(hook), timeout=90, what="the orphaned hook to be ended at its timeout")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hook, signal.SIGKILL)


def test_a_hooks_background_child_and_binary_output_neither_hold_nor_reach_the_log_raw(harness, tmp_path) -> None:
    child_pid = tmp_path / "child-pid"
    # The child keeps the output pipe open long after the hook's shell ended; the shell writes escape bytes.
    harness.settings(on_failed=f"sleep 600 & echo $! > {child_pid}; printf 'red\\033[31m\\377\\n'", hook_timeout_s=60)
    failing_job(harness)
    harness.start_daemon()
    harness.wait_for(lambda: re.search(r"on_failed hook \(pid \d+\) exited 0", harness.daemon_log()), timeout=60,
                     what="the hook's end, its child still running", report=harness.report)
    child = int(child_pid.read_text())
    try:
        assert alive(child)
        output = [line for line in harness.daemon_log().splitlines() if "output: " in line]
        assert [line.partition("output: ")[2] for line in output] == ["red\\x1b[31m\ufffd"]
    finally:
        os.kill(child, signal.SIGKILL)
