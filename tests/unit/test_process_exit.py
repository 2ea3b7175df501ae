"""end_process and the worker's exit_now: a process that loaded torch leaves with its code (and, by end_process,
its exit handlers run), but without the teardown; output that cannot be written does not change the code."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

# An object whose finaliser prints only during the interpreter's teardown of its module, and an exit handler.
PROGRAM = """
import atexit, sys
from rlsup.run.exit import end_process

class TornDown:
    def __del__(self):
        print("torn down", flush=True)

kept = TornDown()
atexit.register(lambda: print("exit handler ran"))
if {torch}:
    import torch
if {thread}:
    import threading, time
    threading.Thread(target=lambda: (time.sleep(0.5), print("thread done", end=""))).start()
print("partial line", end="")
sys.exit(end_process(3))
"""


def run(torch: bool, thread: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROGRAM.format(torch=torch, thread=thread)], capture_output=True,
                          text=True, timeout=120)


def test_with_torch_loaded_it_runs_the_exit_handlers_flushes_and_skips_the_teardown() -> None:
    result = run(torch=True)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "partial lineexit handler ran\n"  # no "torn down": the teardown was skipped


def test_without_torch_it_is_an_ordinary_exit() -> None:
    result = run(torch=False)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "partial lineexit handler ran\ntorn down\n"


def test_a_thread_the_interpreter_would_wait_for_makes_it_an_ordinary_exit() -> None:
    result = run(torch=True, thread=True)
    assert result.returncode == 3, result.stderr
    assert result.stdout == "partial linethread doneexit handler ran\ntorn down\n"


# Buffered output that cannot be written: stdout on /dev/full (every write fails with ENOSPC, as on a full disk).
UNWRITABLE = """
import sys
import torch
from rlsup.run.exit import end_process
from rlsup.worker.training import exit_now

print("buffered, never written", end="")
{leave}
"""


@pytest.mark.parametrize("leave", ["exit_now(74)", "sys.exit(end_process(74))"])
def test_output_that_cannot_be_written_leaves_the_exit_code_alone(leave: str) -> None:
    """A worker that paused on a full disk exits 74 even when its last output cannot be flushed: a traceback and
    exit 1 would read as a crash, which the daemon restarts."""
    buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-c", UNWRITABLE.format(leave=leave)], stdout=full,
                                stderr=subprocess.PIPE, text=True, env=buffered, timeout=120)
    assert (result.returncode, result.stderr) == (74, "")
