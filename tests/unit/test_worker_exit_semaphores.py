"""A worker's os._exit still unlinks multiprocessing's semaphores: no resource-tracker warning after its last line."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# Locks, a queue with an item in flight and an event, from the spawn context V-trace's actors use, still
# referenced when the worker leaves: what a pause with actor processes left behind.
PROGRAM = """
import sys
import torch.multiprocessing as multiprocessing
from rlsup.worker import training as worker
context = multiprocessing.get_context("spawn")
lock, channel, stop = context.Lock(), context.Queue(), context.Event()
channel.put(1)
print(" ".join(semaphore._semlock.name for semaphore in (lock, stop._cond._lock, stop._flag)), flush=True)
print("paused at step 5 with a checkpoint", file=sys.stderr)
worker.exit_now(0)
"""


def test_exit_now_leaves_one_sentence_and_no_semaphores(tmp_path):
    result = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONWARNINGS": "default"})
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == ["paused at step 5 with a checkpoint"]
    names = result.stdout.split()
    assert len(names) == 3
    assert not [name for name in names if Path(f"/dev/shm/sem.{name.lstrip('/')}").exists()]
