"""Ctrl-C and SIGTERM at any moment of `rlsup enjoy`, `export`, `validate` and the TUI: one sentence and 130 or
143, or, once the command is done, its own ending; never a traceback, a crash or a lost signal."""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from rlsup.frames import HIDE_CURSOR
from rlsup_testing import (breakout_job, cartpole_job, interrupted_before_python_ran, interrupts_at_their_default,
                           past_first_line, rlsup_command, run_rlsup, wait_for)

INTERRUPTED = "rlsup: interrupted"
TERMINATED = "rlsup: terminated"
PLAYS_FOR_HOURS = ("--episodes", "100000000")
# Lines arrive as they are printed, so a test can wait for one before it signals.
UNBUFFERED = {"PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trained")
    run_dir = directory / "run"
    result = run_rlsup("run", cartpole_job(directory, total_steps=1_000), "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    return run_dir


def start(*arguments: object, environment: dict[str, str] | None = None, text: bool = True) -> subprocess.Popen:
    """`rlsup ARGS`, with SIGINT at its default as a terminal's foreground job has it."""
    with interrupts_at_their_default():
        return subprocess.Popen(rlsup_command(*map(str, arguments)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=text, env={**os.environ, **UNBUFFERED, **(environment or {})})


def started(*arguments: object, delay_s: float) -> subprocess.Popen:
    """`rlsup ARGS`, delay_s after its first line ran: however loaded the machine, the signal a test sends
    then meets rlsup, not CPython's own start-up (which no program can answer)."""
    process = start(*arguments)
    wait_for(lambda: past_first_line(process.pid), timeout=60)
    time.sleep(delay_s)
    return process


def signalled(process: subprocess.Popen, number: int) -> tuple[str, str]:
    """Send the signal and collect the output; a signal the command lost fails the test, leaving nothing behind."""
    process.send_signal(number)
    try:
        return process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise AssertionError(f"signal {number} was lost: the command went on\n{stderr}") from None


def wait_for_line(stream, prefix: str) -> str:
    """Read the process's stream up to the first line starting with prefix (the line), or fail at its end."""
    for line in stream:
        if line.startswith(prefix):
            return line
    raise AssertionError(f"the stream ended before a line starting with {prefix!r}")


def assert_one_sentence(process: subprocess.Popen, stderr: str, code: int, sentence: str) -> None:
    assert "Traceback" not in stderr and "Fatal Python error" not in stderr, stderr
    assert (process.returncode, stderr.strip().splitlines()) == (code, [sentence]), stderr


def test_ctrl_c_as_enjoy_starts_is_one_sentence_or_cpythons_own_end(trained_run: Path) -> None:
    process = start("enjoy", trained_run, *PLAYS_FOR_HOURS)
    _, stderr = signalled(process, signal.SIGINT)
    if interrupted_before_python_ran(process.returncode, stderr):
        return  # before rlsup's first line: CPython's own start-up, which no program can answer
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)


@pytest.mark.parametrize("delay_s", [0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.6, 2.0])
def test_ctrl_c_while_enjoy_starts_is_one_sentence(trained_run: Path, delay_s: float) -> None:
    """From rlsup's first line, through torch's and gymnasium's imports and the checkpoint's load, to play."""
    process = started("enjoy", trained_run, *PLAYS_FOR_HOURS, delay_s=delay_s)
    _, stderr = signalled(process, signal.SIGINT)
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)


@pytest.mark.parametrize("delay_s", [0.0, 0.3, 0.9])
def test_sigterm_while_enjoy_starts_is_one_sentence(trained_run: Path, delay_s: float) -> None:
    """`kill PID` ends it as Ctrl-C does, in its own words (it used to end without one, killed by the signal)."""
    process = started("enjoy", trained_run, *PLAYS_FOR_HOURS, delay_s=delay_s)
    _, stderr = signalled(process, signal.SIGTERM)
    assert_one_sentence(process, stderr, 128 + signal.SIGTERM, TERMINATED)


@pytest.mark.parametrize("while_", ["starting", "playing"])
def test_two_quick_ctrl_cs_are_one_sentence(trained_run: Path, while_: str) -> None:
    """Starting, the second leaves at once (the first waits for the imports to end: raised inside torch's, it
    crashed the interpreter); playing, the second lands while the first is answered, and must not cut it."""
    process = started("enjoy", trained_run, *PLAYS_FOR_HOURS, delay_s=0.0)
    if while_ == "playing":
        wait_for_line(process.stdout, "episode 1:")
    process.send_signal(signal.SIGINT)
    time.sleep(0.01)
    _, stderr = signalled(process, signal.SIGINT)
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)


def test_ctrl_c_while_enjoy_plays_is_one_sentence(trained_run: Path) -> None:
    process = start("enjoy", trained_run, *PLAYS_FOR_HOURS)
    wait_for_line(process.stdout, "episode 1:")
    _, stderr = signalled(process, signal.SIGINT)
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)


def test_ctrl_c_while_enjoy_draws_restores_the_terminal(tmp_path: Path) -> None:
    """The frames' cleanup runs: the cursor comes back and the colours are reset, however the play ended."""
    run_dir = tmp_path / "run"
    trained = run_rlsup("run", breakout_job(tmp_path, total_steps=100), "--run-dir", run_dir)
    assert trained.returncode == 0, trained.stderr
    process = start("enjoy", run_dir, "--render", "terminal", "--fps", "0", *PLAYS_FOR_HOURS,
                    environment={"COLUMNS": "40", "LINES": "20"}, text=False)
    drawn = b""
    while HIDE_CURSOR.encode() not in drawn:  # the first frame has begun: the cursor is hidden
        chunk = os.read(process.stdout.fileno(), 65536)
        assert chunk, "enjoy ended before drawing a frame"
        drawn += chunk
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    assert_one_sentence(process, stderr.decode(), 128 + signal.SIGINT, INTERRUPTED)
    assert (drawn + stdout).endswith(b"\x1b[0m\x1b[?25h"), (drawn + stdout)[-80:]


def test_ctrl_c_after_enjoy_has_played_leaves_its_result(trained_run: Path) -> None:
    """The command is done: a Ctrl-C while the interpreter tears torch down changes nothing (it printed a
    KeyboardInterrupt traceback from torch's exit handlers, or ended by SIGINT)."""
    process = start("enjoy", trained_run, "--episodes", "2")
    wait_for_line(process.stdout, "mean return")
    _, stderr = signalled(process, signal.SIGINT)
    assert (process.returncode, stderr) == (0, "")


@pytest.mark.parametrize("delay_s", [0.0, 0.5, 1.0, 1.5])
def test_ctrl_c_while_export_works_is_one_sentence(trained_run: Path, tmp_path: Path, delay_s: float) -> None:
    model = tmp_path / "policy.pt"
    process = started("export", trained_run, "--format", "torchscript", "--out", model, delay_s=delay_s)
    stdout, stderr = signalled(process, signal.SIGINT)
    if process.returncode == 0:  # it was done first: the signal came while it ended
        assert stdout.strip() == str(model) and stderr.startswith("wrote ") and stderr.count("\n") == 1, stderr
        return
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)
    assert not model.exists()


def test_ctrl_c_after_export_has_written_leaves_its_result(trained_run: Path, tmp_path: Path) -> None:
    model = tmp_path / "policy.pt"
    process = start("export", trained_run, "--format", "torchscript", "--out", model)
    wrote = wait_for_line(process.stderr, "wrote ")
    stdout, stderr = signalled(process, signal.SIGINT)
    assert (process.returncode, stdout.strip(), stderr) == (0, str(model), ""), (wrote, stderr)
    assert model.is_file()


@pytest.mark.parametrize("delay_s", [0.0, 0.2, 0.4, 0.8])
def test_ctrl_c_while_validate_checks_the_env_is_one_sentence(tmp_path: Path, delay_s: float) -> None:
    """Through gymnasium's and ale_py's imports (held until they are whole) and the env's making."""
    job = breakout_job(tmp_path, total_steps=100)
    process = started("validate", job, delay_s=delay_s)
    stdout, stderr = signalled(process, signal.SIGINT)
    if process.returncode == 0:  # it was done first
        assert stdout.startswith(f"{job}: ok") and stderr == "", stderr
        return
    assert_one_sentence(process, stderr, 128 + signal.SIGINT, INTERRUPTED)


def read_until(descriptor: int, wanted: bytes, timeout: float = 60.0) -> bytes:
    """What the terminal showed up to and including wanted; fails if it never shows it."""
    seen, deadline = b"", time.monotonic() + timeout
    while wanted not in seen and time.monotonic() < deadline:
        if select.select([descriptor], [], [], 0.1)[0]:
            try:
                seen += os.read(descriptor, 65536)
            except OSError:  # the terminal's other side closed: everything was read
                break
    assert wanted in seen, seen[-300:]
    return seen


@pytest.mark.parametrize("number, sentence", [(signal.SIGTERM, TERMINATED), (signal.SIGINT, INTERRUPTED)])
def test_a_stop_signal_while_the_tui_starts_gives_the_terminal_back(tmp_path: Path, number: int,
                                                                     sentence: str) -> None:
    """Raised into Textual's loop as it started, the signal used to leave the terminal in the alternate screen
    (SIGTERM, by default, killed it outright); now the app closes as its quit key closes it, then rlsup says
    why in its one sentence."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    environment = {**os.environ, "RLSUP_HOME": str(tmp_path / "home"), "TERM": "xterm-256color"}
    process = subprocess.Popen(rlsup_command("tui"), stdin=follower, stdout=follower, stderr=follower,
                               env=environment, start_new_session=True)
    os.close(follower)
    try:
        shown = read_until(leader, b"\x1b[?1049h")  # Textual has taken the alternate screen, and goes on starting
        process.send_signal(number)
        shown += read_until(leader, f"{sentence}\r\n".encode())
        assert process.wait(timeout=60) == 128 + number
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    assert b"\x1b[?1049l" in shown, shown[-300:]
    left = shown.rpartition(b"\x1b[?1049l")[2]  # what stays on the terminal once the alternate screen is left
    assert b"\x1b[?25h" in left, left  # the cursor is back
    assert re.sub(rb"\x1b\[[0-9;?<>]*[a-zA-Z]", b"", left).decode().strip() == sentence, left  # no error panel
