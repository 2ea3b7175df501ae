"""A writer SIGKILLed in the middle of a large checkpoint leaves the previous one intact and readable."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from rlsup.checkpoint.manifest import list_checkpoints, verify
from rlsup.checkpoint.store import load_checkpoint, write_checkpoint

# Checkpoint A is small. B is a 300 MiB array followed by many small files, each fsynced, so the
# rename that would publish B is far off when the test sees the big file growing and kills the writer.
WRITER = """
import sys
from pathlib import Path
import numpy as np
from rlsup.checkpoint.store import write_checkpoint

run_dir = Path(sys.argv[1])
def write(state, step):
    write_checkpoint(run_dir, state, step=step, episodes=step, reason="interval", fingerprint=f"print-{step}",
                     spec_sha256="spec", metrics_bytes=0, keep=5)

write({"frames": np.arange(1000, dtype=np.uint16), "counter": 1}, 1)
big = np.full(300 << 20, 7, dtype=np.uint8)
write({"replay": {"frames": big}, "envs": {str(index): np.full(8, index) for index in range(400)}}, 2)
print("B finished, the test was too slow to kill it", file=sys.stderr)
"""

GROWING_BYTES = 32 << 20


def wait_for(condition, process: subprocess.Popen, what: str, timeout: float = 60.0):
    """Poll condition until it returns something true; fail if the writer exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if process.poll() is not None:
            raise AssertionError(f"writer exited ({process.returncode}) before {what}: {process.stderr.read()}")
        time.sleep(0.002)
    raise AssertionError(f"timed out waiting for {what}")


def checkpoint_a_written(checkpoints: Path) -> bool:
    return (checkpoints / "step-000000000001" / "manifest.json").exists()


def big_file_growing(checkpoints: Path) -> Path | None:
    for temporary in checkpoints.glob(".tmp-step-000000000002-*"):
        frames = temporary / "arrays" / "replay.frames.npy"
        try:
            if frames.stat().st_size > GROWING_BYTES:
                return temporary
        except FileNotFoundError:
            pass
    return None


def test_sigkill_mid_write_leaves_the_previous_checkpoint(tmp_path):
    checkpoints = tmp_path / "checkpoints"
    process = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: checkpoint_a_written(checkpoints), process, "checkpoint A")
        temporary = wait_for(lambda: big_file_growing(checkpoints), process, "checkpoint B's array to grow")
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()

    assert not (checkpoints / "step-000000000002").exists()
    assert temporary.is_dir()  # the half-written B is still there, and ignored
    entries = list_checkpoints(tmp_path)
    assert [entry.step for entry in entries] == [1]
    assert verify(entries[0].path) is None
    _, state = load_checkpoint(entries[0].path)
    assert state["counter"] == 1
    np.testing.assert_array_equal(state["frames"], np.arange(1000, dtype=np.uint16))

    # The next write (a resumed worker's) clears what the dead writer left.
    write_checkpoint(tmp_path, {"counter": 3}, step=3, episodes=3, reason="interval", fingerprint="print-3",
                     spec_sha256="spec", metrics_bytes=0, keep=5)
    assert not temporary.exists()
    assert [name for name in os.listdir(checkpoints) if name.startswith(".")] == []
    assert [entry.step for entry in list_checkpoints(tmp_path)] == [1, 3]
