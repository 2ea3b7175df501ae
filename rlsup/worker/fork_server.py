"""The daemon's fork server: imports torch and the worker's modules once, then forks each worker it is asked for."""
from __future__ import annotations

import importlib
import os
import selectors
import signal
import socket
import sys
import traceback
import warnings
from dataclasses import dataclass, field
from typing import NoReturn

from rlsup.run import fork_protocol as protocol
from rlsup.run.exit import leave_now
from rlsup.run.signals import LISTENED_SIGNALS, release_signals

# What every worker imports before it trains: about 2.5 s and a torch import's CPU, paid here once. The env's
# own packages (a user's, ale_py, MinAtar) are left to each worker, which imports them as a fresh process would.
PRELOADED = ("numpy", "torch", "gymnasium", "rlsup.worker.training", "rlsup.algos.dqn", "rlsup.algos.impala",
             "rlsup.algos.envs.sources", "rlsup.algos.envs.vectorise")
# numpy's BLAS pool is a thread of this process, so Python 3.12 warns at each fork. It is safe: OpenBLAS stops
# its pool around fork(), and nothing else runs here.
warnings.filterwarnings("ignore", message=r".*multi-threaded.*fork\(\)", category=DeprecationWarning)


@dataclass
class Request:
    """A worker to become: what the daemon asked for, and the log the worker's output goes to."""

    run_dir: str
    environment: dict[str, str]
    cwd: str
    log: int


@dataclass
class Server:
    """The server's own descriptors, each of which a forked worker closes first."""

    channel: socket.socket
    selector: selectors.BaseSelector
    wake_read: int
    wake_write: int
    stamp: dict[str, tuple[int, int]]
    children: set[int] = field(default_factory=set)

    def close_in_child(self) -> None:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.selector.close()
        self.channel.close()
        os.close(self.wake_read)
        os.close(self.wake_write)


def main(argv: list[str]) -> int:
    """`python -m rlsup.worker --fork-server HOME`, its channel to the daemon as stdin. Returns when the
    daemon closes its end; in a forked worker, never returns (the worker leaves by leave_now)."""
    channel = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    why = preload()
    if why:
        protocol.send(channel, protocol.FAILED, why=why)
        return 1
    release_signals()  # held (worker/__main__.py) through the imports; a worker's fork holds them again
    server = open_server(channel)
    protocol.send(channel, protocol.READY, pid=os.getpid())
    request = serve(server)
    if request is None:
        return 0
    return become_worker(server, request)


def preload() -> str | None:
    """Import what workers import; one line on what failed (the workers then start cold, and say it)."""
    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except Exception as error:  # an install broken in any way: the daemon starts its workers cold
            return f"cannot import {name}: {type(error).__name__}: {error}"
    return None


def open_server(channel: socket.socket) -> Server:
    wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wake-up descriptor hears it
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    return Server(channel, selector, wake_read, wake_write, code_stamp())


def serve(server: Server) -> Request | None:
    """Answer requests and report exits until the daemon has gone (None), or, in a forked worker, its Request."""
    while True:
        for key, _events in server.selector.select(timeout=1.0):
            if key.fileobj is server.wake_read:
                drain_wake_ups(server.wake_read)
            elif key.fileobj is server.channel:
                message, descriptors = protocol.receive(server.channel)
                if message is None:
                    return None
                request = answer(server, message, descriptors)
                if request is not None:
                    return request
        report_exits(server)


def answer(server: Server, message: dict, descriptors: list[int]) -> Request | None:
    """Fork the worker asked for; a Request only in that worker, None in the server."""
    number = message.get("request")
    request = parse_request(message, descriptors)
    if request is None:
        for descriptor in descriptors:
            os.close(descriptor)
        protocol.send(server.channel, protocol.REFUSED, request=number, why="a malformed request")
        return None
    why = reason_not_to_fork(server)
    if why:
        os.close(request.log)
        protocol.send(server.channel, protocol.REFUSED, request=number, why=why)
        return None
    in_session_read, in_session_write = os.pipe2(os.O_CLOEXEC)
    # As the daemon starts a cold worker, the child starts with the stop signals held: one sent while it starts
    # waits, pending, until the run listens. Not a `with` block: the child would leave it too, releasing them.
    unheld = signal.pthread_sigmask(signal.SIG_BLOCK, LISTENED_SIGNALS)
    try:
        pid = os.fork()
    except OSError as error:  # no memory or no pids left: the daemon starts it cold, or says why it cannot
        signal.pthread_sigmask(signal.SIG_SETMASK, unheld)
        for descriptor in (in_session_read, in_session_write, request.log):
            os.close(descriptor)
        protocol.send(server.channel, protocol.REFUSED, request=number, why=f"fork failed: {error.strerror}")
        return None
    if pid == 0:
        os.close(in_session_read)
        os.setsid()  # its own session, as start_new_session gives a cold one: a kill takes its whole group
        os.close(in_session_write)
        return request
    signal.pthread_sigmask(signal.SIG_SETMASK, unheld)
    os.close(in_session_write)
    os.read(in_session_read, 1)  # returns at the worker's setsid (or its death): then its group is its pid
    os.close(in_session_read)
    os.close(request.log)
    server.children.add(pid)
    protocol.send(server.channel, protocol.STARTED, request=number, pid=pid)
    return None


def parse_request(message: dict, descriptors: list[int]) -> Request | None:
    environment, run_dir, cwd = message.get("environment"), message.get("run_dir"), message.get("cwd")
    if (message.get("kind") != protocol.START or len(descriptors) != 1 or not isinstance(run_dir, str)
            or not isinstance(cwd, str) or not isinstance(environment, dict)
            or not all(isinstance(key, str) and isinstance(value, str) for key, value in environment.items())):
        return None
    return Request(run_dir, environment, cwd, descriptors[0])


def reason_not_to_fork(server: Server) -> str | None:
    """Why a fork now would not give the worker a fresh interpreter would; the daemon then starts it cold."""
    if code_stamp() != server.stamp:
        return "the installed code changed since the fork server started"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "CUDA is initialised in the fork server"  # never by design; a forked child could not use it
    return None


def code_stamp() -> dict[str, tuple[int, int]]:
    """Size and modification time of every module file loaded here, and of each directory on sys.path (an
    install adds an entry there): a change means the workers would run what is no longer installed."""
    files = {getattr(module, "__file__", None) for module in list(sys.modules.values())}
    files.update(entry for entry in sys.path if entry)
    stamp = {}
    for path in files:
        if isinstance(path, str):
            try:
                status = os.stat(path)
            except OSError:
                continue
            stamp[path] = (status.st_mtime_ns, status.st_size)
    return stamp


def drain_wake_ups(descriptor: int) -> None:
    try:
        while os.read(descriptor, 512):
            pass
    except BlockingIOError:
        pass


def report_exits(server: Server) -> None:
    """Reap every child that has ended and tell the daemon how: the server is their parent, not the daemon."""
    for pid in list(server.children):
        try:
            ended, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            server.children.discard(pid)
            continue
        if ended:
            server.children.discard(pid)
            protocol.send(server.channel, protocol.EXITED, pid=pid, returncode=os.waitstatus_to_exitcode(status))


def become_worker(server: Server, request: Request) -> NoReturn:
    """In the forked child: take the state a fresh `python -m rlsup.worker RUN` would have, then be it."""
    server.close_in_child()
    os.dup2(request.log, 1)
    os.dup2(request.log, 2)
    os.close(request.log)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.environment)
    importlib.invalidate_caches()  # modules written since the server started are found, as a fresh process would
    reseed_global_generators()
    sys.argv[1:] = [request.run_dir]
    code = 1
    try:
        from rlsup.worker.training import main as worker_main

        code = worker_main([request.run_dir])
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else 1
    except BaseException:
        traceback.print_exc()  # what a fresh interpreter prints for an uncaught exception, into worker.log
    finally:
        leave_now(code)


def reseed_global_generators() -> None:
    """numpy's global generator takes fresh entropy in every new process (random's reseeds itself at fork);
    rlsup seeds its own, but an env that draws from the global one must not repeat its siblings' draws."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
