"""end_process: a process that loaded torch leaves with its code and its exit handlers run, but no teardown."""
from __future__ import annotations

import subprocess
import sys

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
