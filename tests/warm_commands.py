"""`rlsup run`, `enjoy` and `export` forked from a server that imported torch once, for tests that train to test.

Such a command spends about 2.5 s of CPU importing torch before its first step, and the suite starts hundreds
of them: a third of its CPU went to those imports. The server (one per pytest process, started when first
asked) imports what a worker imports, the way the daemon's own fork server does (rlsup/worker/fork_server.py),
and forks each command: a real process with its own pid, its output on pipes, its signals and exit status its
own, running `python -m rlsup.cli`'s code from its first line. Only its interpreter's start-up is skipped, so a
test of what happens during start-up (a Ctrl-C as Python starts) starts its command cold (rlsup_testing.py),
as does any command whose environment differs from the server's in a variable that acts as a process starts
(IMPORT_TIME_PREFIXES: PYTHONPATH and the like act at import, which the server did once).

Run as a script, this file is the server: `python warm_commands.py`, its channel as stdin.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import locale
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import time

from rlsup.run import fork_protocol as protocol

# The commands worth a warm start: those that import torch.
WARM_COMMANDS = frozenset({"run", "enjoy", "export"})
# What would make a forked command differ from a fresh one: a variable the interpreter or the libraries the server
# imported read as they start (search paths, thread pools, CUDA, torch's own switches), or one of rlsup's but
# RLSUP_HOME. A command whose environment differs from the server's in one of these starts cold, but for a
# PYTHONPATH that only adds directories of modules the server has not imported (a user's env package): the fork
# gets those on sys.path where a fresh interpreter puts them (python_path_fits, command_sys_path). Any other
# variable (pytest's, a plugin's, one a library imported by a test set, COLUMNS) is read at run time, from the
# environment the fork is given. tests/integration/test_warm_commands.py fails when a plain run under pytest is
# not forked warm, which happened twice while this list was an allowance instead.
IMPORT_TIME_PREFIXES = ("PYTHON", "LD_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "NPY_",
                        "NUMPY_", "CUDA_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_", "RLSUP_")
RUN_TIME_EXCEPTIONS = frozenset({"PYTHONUNBUFFERED", "RLSUP_HOME"})  # applied by the fork itself / read at run time
READY_WAIT_S = 180.0
# RLSUP_TESTS_COLD=1 starts every command cold, as before the server: to compare, or to rule the server out.
ALL_COLD = os.environ.get("RLSUP_TESTS_COLD") == "1"
# Libraries that change the process's environment as they are imported, imported before the baseline is taken:
# cv2 (rlsup.enjoy's, and the video tests') prepends its lib64 to LD_LIBRARY_PATH, so the first test to import it
# sent every later command of its pytest process cold. gymnasium's and ray's variables are read at run time.
import cv2  # noqa: E402,F401  (a dependency of rlsup: tests/integration/test_warm_commands.py holds this)

# The environment the server imports in: pytest's as this module is imported, at collection, before any test has
# set a variable of its own (a server started inside such a test would have sent every later command cold).
BASELINE = os.environ.copy()


# --------------------------------------------------------------------------------------------------------
# The server: imports once, forks each command, reports how each ended.

def serve() -> int:
    channel = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    # What `python -m rlsup.cli` has as argv while it imports, so that rlsup/cli/program.py takes the imports for
    # the program's: rlsup.cli then holds the stop signals as it does in a fresh command, and its forks inherit
    # them held, as a fresh command has them past its first line.
    sys.argv = ["-m"]
    from rlsup.worker.fork_server import PRELOADED, drain_wake_ups, open_server
    before = os.environ.copy()
    for name in (*PRELOADED, "rlsup.cli", "rlsup.enjoy"):
        __import__(name)
    # What the imports set in the environment (gymnasium hides pygame's greeting so): a fresh command sets it
    # as it imports, so each forked one gets it on top of the environment it was asked for.
    set_by_imports = {key: value for key, value in os.environ.items() if before.get(key) != value}
    # sys.path as an interpreter builds it but for the script's directory and PYTHONPATH's entries: a fork puts
    # its own in front (command_sys_path).
    own_entries = python_path_entries(BASELINE.get("PYTHONPATH"), os.getcwd())
    standard_path = [entry for entry in sys.path[1:] if entry not in own_entries]
    server = open_server(channel)  # the daemon's fork server's channel, selector and SIGCHLD wake-ups
    protocol.send(channel, protocol.READY, pid=os.getpid(), standard_path=standard_path,
                  imported=sorted({name.partition(".")[0] for name in sys.modules}))
    requests: dict[int, int] = {}  # pid: the number of the request it was forked for
    while True:
        for key, _events in server.selector.select(timeout=1.0):
            if key.fileobj is server.wake_read:
                drain_wake_ups(server.wake_read)
                continue
            message, descriptors = protocol.receive(channel)
            if message is None:
                return 0
            pid = os.fork()
            if pid == 0:
                server.close_in_child()
                become_command(message, descriptors, set_by_imports, standard_path)
            for descriptor in descriptors:
                os.close(descriptor)
            requests[pid] = message["request"]
            protocol.send(channel, protocol.STARTED, request=message["request"], pid=pid)
        report_exits(channel, requests)


def report_exits(channel: socket.socket, requests: dict[int, int]) -> None:
    """Each command that ended, by its request's number: a pid may be used again by a later command."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        protocol.send(channel, protocol.EXITED, request=requests.pop(pid), returncode=os.waitstatus_to_exitcode(status))


def become_command(message: dict, descriptors: list[int], set_by_imports: dict[str, str],
                   standard_path: list[str]) -> None:
    """In the forked child: the command's streams, session, signals, directory and environment, then its code.
    Never returns."""
    if message["new_session"]:
        os.setsid()
    for target, descriptor in enumerate(descriptors):
        os.dup2(descriptor, target)
        os.close(descriptor)
    # A fresh CPython catches SIGINT unless it started with SIGINT ignored, which a background job's child does.
    signal.signal(signal.SIGINT, signal.SIG_IGN if message["sigint_ignored"] else signal.default_int_handler)
    os.chdir(message["cwd"])
    os.environ.clear()
    os.environ.update(message["environment"])
    os.environ.update(set_by_imports)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    unbuffered = bool(message["environment"].get("PYTHONUNBUFFERED"))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=False, write_through=unbuffered)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, errors="backslashreplace")
    sys.argv = [message["argv0"], *message["arguments"]]
    sys.path[:] = command_sys_path(message["environment"].get("PYTHONPATH"), message["cwd"], standard_path)
    code = 0
    try:
        runpy.run_module("rlsup.cli", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, (int, type(None))):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:  # as CPython ends on an uncaught Ctrl-C: by the signal itself
        code = None
    except BaseException:  # as CPython prints an uncaught exception, and exits 1
        import traceback
        traceback.print_exc()
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)


# --------------------------------------------------------------------------------------------------------
# The tests' side: one server per pytest process, and a Popen of each command it forked.

class Server:
    """The server process and its channel; the exit status of every command it forked, as reported."""

    def __init__(self):
        self.channel, server_end = protocol.channel_pair()
        self.process = subprocess.Popen([sys.executable, __file__], stdin=server_end, stdout=subprocess.DEVNULL,
                                        env=BASELINE, close_fds=True)
        server_end.close()
        self.requests = 0
        self.replies: dict[int, int] = {}
        self.returncodes: dict[int, int] = {}
        message = self.next_message(READY_WAIT_S)
        if message is None or message["kind"] != protocol.READY:
            raise RuntimeError(f"the tests' fork server did not start: {message}")
        self.imported = frozenset(message["imported"])  # top-level names, as a PYTHONPATH would shadow them
        self.standard_path: list[str] = message["standard_path"]

    def next_message(self, timeout: float | None) -> dict | None:
        """The next message within timeout; None past it, or once the server has gone."""
        if not select_readable(self.channel, timeout):
            return None
        message, descriptors = protocol.receive(self.channel)
        for descriptor in descriptors:
            os.close(descriptor)
        if message is not None and message["kind"] == protocol.EXITED:
            self.returncodes[message["request"]] = message["returncode"]
        if message is not None and message["kind"] == protocol.STARTED:
            self.replies[message["request"]] = message["pid"]
        return message

    def fork(self, arguments: list[str], environment: dict[str, str], new_session: bool,
             streams: tuple[int, int, int]) -> tuple[int, int]:
        """(request number, pid) of the command forked with these arguments, environment and streams."""
        self.requests += 1
        number = self.requests
        sigint_ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        protocol.send(self.channel, "start", streams, request=number, arguments=arguments, argv0=sys.argv[0],
                      environment=environment, cwd=os.getcwd(), new_session=new_session,
                      sigint_ignored=sigint_ignored)
        while number not in self.replies:
            if self.next_message(30.0) is None and number not in self.replies:
                raise RuntimeError("the tests' fork server did not answer")
        return number, self.replies.pop(number)

    def collect(self, number: int, timeout: float | None) -> int | None:
        """The return code of request number's command, once it has ended within timeout; else None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while number not in self.returncodes:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if self.next_message(left) is None and self.process.poll() is not None:
                raise RuntimeError("the tests' fork server ended")
        return self.returncodes.pop(number)


def select_readable(channel: socket.socket, timeout: float | None) -> bool:
    with selectors.DefaultSelector() as selector:
        selector.register(channel, selectors.EVENT_READ)
        return bool(selector.select(timeout))


_server: Server | None = None


def warm_enough(arguments: list[str], environment: dict[str, str]) -> bool:
    """Whether this command may be forked: a torch command whose environment the server's imports fit."""
    if ALL_COLD or not arguments or arguments[0] not in WARM_COMMANDS:
        return False
    differences = import_time_differences(environment)
    if differences == {"PYTHONPATH"}:
        return python_path_fits(environment["PYTHONPATH"], os.getcwd())
    return not differences


# Modules Python imports from sys.path as it starts, before any command's code: a fork would never run them.
START_UP_MODULES = frozenset({"sitecustomize", "usercustomize"})


def python_path_fits(value: str, cwd: str) -> bool:
    """Whether a fork can take this PYTHONPATH on sys.path alone: each entry the server did not start with is
    a directory (or nothing yet) whose modules the server has not imported and that holds no start-up module.
    A hidden package (rlsup_testing.path_hiding) of one the server imported sends its command cold."""
    known = set(python_path_entries(BASELINE.get("PYTHONPATH"), cwd))
    taken = warm_server().imported | START_UP_MODULES
    for entry in python_path_entries(value, cwd):
        if entry in known or not os.path.exists(entry):
            continue
        if not os.path.isdir(entry) or {name.partition(".")[0] for name in os.listdir(entry)} & taken:
            return False
    return True


def python_path_entries(value: str | None, cwd: str) -> list[str]:
    """PYTHONPATH's entries as sys.path holds them: absolute from cwd, an empty one as cwd itself."""
    return [os.path.abspath(os.path.join(cwd, entry)) for entry in value.split(os.pathsep)] if value else []


def command_sys_path(value: str | None, cwd: str, standard_path: list[str]) -> list[str]:
    """sys.path of `python -m` run in cwd with this PYTHONPATH: cwd, then PYTHONPATH's entries and the standard
    ones with repeats dropped (site.removeduppaths)."""
    unique = list(dict.fromkeys([*python_path_entries(value, cwd), *standard_path]))
    return [cwd, *unique]


def import_time_differences(environment: dict[str, str]) -> set[str]:
    """The variables, acting at start-up, in which environment differs from the one the server imported in."""
    return {key for key in set(environment) | set(BASELINE)
            if key.startswith(IMPORT_TIME_PREFIXES) and key not in RUN_TIME_EXCEPTIONS
            and environment.get(key) != BASELINE.get(key)}


def warm_server() -> Server:
    """The server of this pytest process, started when first asked for."""
    global _server
    if _server is None:
        _server = Server()
    return _server


class WarmProcess:
    """A forked command, with what tests use of subprocess.Popen (text mode): pid, stdout and stderr, poll,
    wait, communicate, send_signal, kill."""

    def __init__(self, arguments: list[str], environment: dict[str, str], new_session: bool):
        self.args = arguments
        self.returncode: int | None = None
        out_read, out_write = os.pipe2(os.O_CLOEXEC)
        error_read, error_write = os.pipe2(os.O_CLOEXEC)
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        try:
            streams = (null, out_write, error_write)
            self.number, self.pid = warm_server().fork(arguments, environment, new_session, streams)
        finally:
            for descriptor in (null, out_write, error_write):
                os.close(descriptor)
        self.stdin = None
        self.stdout = io.TextIOWrapper(io.BufferedReader(io.FileIO(out_read, "r")))
        self.stderr = io.TextIOWrapper(io.BufferedReader(io.FileIO(error_read, "r")))
        self._output: dict[int, bytearray] = {}

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = warm_server().collect(self.number, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = warm_server().collect(self.number, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, input=None, timeout: float | None = None) -> tuple[str, str]:
        """Both streams read to their end, then the exit waited for; on a timeout, what was read so far is kept
        for the next call, as Popen keeps it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        streams = [stream for stream in (self.stdout, self.stderr) if not stream.closed]
        with selectors.DefaultSelector() as selector:
            for stream in streams:
                self._output.setdefault(stream.fileno(), bytearray())
                selector.register(stream.fileno(), selectors.EVENT_READ)
            while selector.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                for key, _events in selector.select(left):
                    data = os.read(key.fd, 1 << 16)
                    if data:
                        self._output[key.fd] += data
                    else:
                        selector.unregister(key.fd)
        texts = [decoded(self._output.get(stream.fileno(), b"") if not stream.closed else b"") for stream in
                 (self.stdout, self.stderr)]
        for stream in (self.stdout, self.stderr):
            stream.close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return texts[0], texts[1]

    def send_signal(self, number: int) -> None:
        """As Popen's: nothing once the command has ended. The server reaps its commands at once, so one that
        ended since the poll is gone, not a zombie (its pid could be another's only after the kernel went round
        its whole pid space)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> "WarmProcess":
        return self

    def __exit__(self, *exception) -> None:
        for stream in (self.stdout, self.stderr):
            stream.close()
        self.wait()


def decoded(data: bytes) -> str:
    """Bytes as Popen's text mode gives them: the locale's encoding, universal newlines."""
    return bytes(data).decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    sys.exit(serve())
