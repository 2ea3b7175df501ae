"""`python -I hook_shell.py SECONDS TAIL_BYTES COMMAND`: a hook's shell under its own deadline, its output cut.

The daemon starts every hook under this process, which carries what the hook must obey when no daemon is
left to see to it (one SIGKILLed, or stopped): at SECONDS it kills its whole process group, and of the
shell's output (stdout and stderr) it keeps only the last TAIL_BYTES, which it writes to its own stdout as it
ends. Before, the daemon kept all of it in a file under $TMPDIR: a hook running `yes` wrote 0.8-2 GB there in
3 s, and a hook orphaned by a killed daemon ran for ever. It imports only the standard library and runs
isolated (-I): nothing from the environment or the current directory is imported into it.
"""
import contextlib
import os
import select
import signal
import subprocess
import sys
import time


def main(arguments: list[str]) -> int:
    seconds, tail_bytes, command = float(arguments[0]), int(arguments[1]), arguments[2]
    deadline = time.monotonic() + seconds
    reading, writing = os.pipe()
    # Same process group as this one, which the daemon made the leader of a new session.
    shell = subprocess.Popen(["/bin/sh", "-c", command], stdout=writing, stderr=writing)
    os.close(writing)
    tail = bytearray()
    open_pipe = True
    while open_pipe and shell.poll() is None and time.monotonic() < deadline:
        # Asked again every 0.1 s: the shell's end ends the hook, though a child it left in the background
        # may hold the pipe open after it.
        if select.select([reading], [], [], min(0.1, max(0.0, deadline - time.monotonic())))[0]:
            chunk = os.read(reading, 65536)
            open_pipe = bool(chunk)
            tail += chunk
            del tail[:-tail_bytes]
    with contextlib.suppress(subprocess.TimeoutExpired):  # the pipe closed early: the shell's end is all to wait for
        shell.wait(timeout=max(0.0, deadline - time.monotonic()))
    tail += read_available(reading) if open_pipe else b""
    write_out(bytes(tail[-tail_bytes:]))
    if shell.poll() is None:  # past its deadline; decided before the pipe closes, which may end it otherwise
        os.killpg(0, signal.SIGKILL)  # the shell, what it started, and this process: the daemon sees signal 9
    os.close(reading)  # a child left behind that writes on gets EPIPE: nothing more is kept
    code = shell.returncode
    if code < 0:  # killed by a signal: end the same way, so the daemon reports that signal
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code  # a signal that does not end a process by default
    return code


def read_available(reading: int, limit: int = 1024 * 1024) -> bytes:
    """What the pipe holds now, up to limit bytes (a child left behind may be writing still)."""
    os.set_blocking(reading, False)
    data = bytearray()
    while len(data) < limit:
        try:
            chunk = os.read(reading, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


def write_out(data: bytes) -> None:
    try:
        os.write(1, data)
    except OSError:  # the daemon stopped and closed its end: nobody reads it
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
