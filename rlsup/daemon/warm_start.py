"""The daemon's warm start: a fork server imports torch once for every worker, forks each, and relays its exit."""
from __future__ import annotations

import itertools
import logging
import os
import select
import subprocess
import time
from pathlib import Path

from rlsup.daemon.runner import RunnerUnavailable
from rlsup.run import fork_protocol as protocol

log = logging.getLogger("rlsup.daemon")

READY_WAIT_S = 120.0  # a machine under load may take a minute to import torch; past this, workers start cold
REPLY_WAIT_S = 10.0   # a fork answers in milliseconds
RELAY_WAIT_S = 5.0    # a worker dead this long and not reported: its server is stuck, and exit.json tells instead
LAUNCHES = 4          # servers one daemon launches before it starts every worker cold


class ForkServer:
    """One server process and its channel: whether it is ready, the workers it forked, how those ended."""

    def __init__(self, process: subprocess.Popen, channel):
        self.process = process
        self.channel = channel
        self.launched = time.monotonic()
        self.ready = False
        self.failed: str | None = None   # why it never became ready, in its own words
        self.forked: set[int] = set()    # its workers whose end it has not reported yet
        self.returncodes: dict[int, int] = {}
        self.replies: dict[int, dict] = {}

    @property
    def serving(self) -> bool:
        return self.channel is not None

    def drain(self) -> None:
        """Take every message waiting, without blocking."""
        while self.channel is not None:
            try:
                message, descriptors = protocol.receive(self.channel)
            except BlockingIOError:
                return
            except OSError:
                message, descriptors = None, []
            for descriptor in descriptors:
                os.close(descriptor)
            if message is None:
                self.closed()
                return
            self.take(message)

    def take(self, message: dict) -> None:
        kind = message["kind"]
        if kind == protocol.READY:
            self.ready = True
            log.info("warm start: fork server pid %s ready after %.1f s", self.process.pid,
                     time.monotonic() - self.launched)
        elif kind == protocol.FAILED:
            self.failed = str(message.get("why"))
        elif kind == protocol.EXITED and isinstance(message.get("pid"), int):
            self.forked.discard(message["pid"])
            self.returncodes[message["pid"]] = int(message.get("returncode", 1))
        elif kind in (protocol.STARTED, protocol.REFUSED):
            self.replies[message.get("request")] = message

    def closed(self) -> None:
        """Its end of the channel closed: it has exited (or is exiting), and reports nothing more."""
        self.channel.close()
        self.channel = None
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass

    def wait(self, until: float) -> None:
        """Block until a message comes or until the monotonic time `until`."""
        remaining = until - time.monotonic()
        if self.channel is not None and remaining > 0:
            select.select([self.channel], [], [], remaining)
        self.drain()

    def kill(self) -> None:
        """A server that does not answer: end it. Its workers live on, as adopted workers do."""
        try:
            self.process.kill()
        except OSError:
            pass
        if self.channel is not None:
            self.closed()

    def retire(self) -> None:
        """No more forks from this one; closed once every worker it forked has been reported."""
        if self.channel is not None and not self.forked:
            self.channel.close()
            self.channel = None


class ForkedWorker:
    """A worker the fork server started, with Popen's poll() and send_signal(): its parent, the server, relays
    how it ended."""

    def __init__(self, pid: int, server: ForkServer):
        self.pid = pid
        self.server = server
        self.dead_since: float | None = None

    def poll(self) -> int | None:
        self.server.drain()
        return self.server.returncodes.get(self.pid)

    def send_signal(self, number: int) -> None:
        os.kill(self.pid, number)

    def relayed(self, alive: bool) -> bool:
        """Whether its end will be relayed: its server still runs and has not sat on its death (alive: whether
        the worker runs, neither gone nor a zombie its server has not reaped)."""
        if not self.server.serving:
            return False
        if alive:
            self.dead_since = None
            return True
        self.dead_since = self.dead_since or time.monotonic()
        return time.monotonic() - self.dead_since < RELAY_WAIT_S


class WarmStart:
    """Launches fork servers as workers are needed and asks the current one for each worker."""

    def __init__(self, command: tuple[str, ...], environment: dict[str, str], cwd: Path):
        self.command = tuple(command)
        self.environment = environment
        self.cwd = Path(cwd)
        self.current: ForkServer | None = None
        self.retired: list[ForkServer] = []
        self.launches = 0
        self.off: str | None = None  # why this daemon starts every worker cold from now on
        self.requests = itertools.count(1)

    def warming(self) -> bool:
        """Whether a server is importing (launched now if none runs): a job waits for it a round or two rather
        than start cold beside it, which would cost a second torch import."""
        server = self._server()
        return server is not None and not server.ready

    def fork(self, run_dir: Path, environment: dict[str, str], cwd: Path, log: int) -> ForkedWorker | None:
        """The worker forked with this environment and cwd, its output to log; None when it is to start cold.
        Raises RunnerUnavailable when a server may have forked it without saying so: the daemon then looks for
        it through the run's lock, as after a crash while starting, before it starts another."""
        server = self._server()
        while server is not None and not server.ready:
            server.wait(server.launched + READY_WAIT_S)
            server = self._server()
        if server is None:
            return None
        number = next(self.requests)
        try:
            protocol.send(server.channel, protocol.START, (log,), request=number, run_dir=str(run_dir),
                          environment=environment, cwd=str(cwd))
        except OSError as error:
            self._lost(server, f"its channel failed ({error.strerror or error})")
            return None
        reply = self._reply(server, number)
        if reply.get("kind") == protocol.STARTED and isinstance(reply.get("pid"), int):
            server.forked.add(reply["pid"])
            return ForkedWorker(reply["pid"], server)
        log_retired(server, f"it refused a worker: {reply.get('why')}")
        self._retire(server)
        return None

    def _reply(self, server: ForkServer, number: int) -> dict:
        deadline = time.monotonic() + REPLY_WAIT_S
        while number not in server.replies:
            if not server.serving or time.monotonic() >= deadline:
                why = "ended" if not server.serving else f"did not answer within {REPLY_WAIT_S:.0f} s"
                server.kill()
                self._lost(server, f"it {why} while forking a worker")
                raise RunnerUnavailable(f"the warm start's fork server {why} while starting the worker")
            server.wait(deadline)
        return server.replies.pop(number)

    def drain(self) -> None:
        """Take every server's messages; close retired ones that have nothing left to report, and reap them."""
        for server in [self.current, *self.retired]:
            if server is not None:
                server.drain()
        for server in self.retired:
            server.retire()
        self.retired = [server for server in self.retired if server.serving or server.process.poll() is None]

    def _server(self) -> ForkServer | None:
        """The current server, launched when none runs; None once the warm start is off."""
        self.drain()
        server = self.current
        if server is not None and server.failed:
            self._turn_off(f"the fork server could not import: {server.failed}")
        elif server is not None and not server.serving:
            self._lost(server, "it ended")
        elif server is not None and not server.ready and time.monotonic() - server.launched > READY_WAIT_S:
            server.kill()
            self._turn_off(f"the fork server was not ready after {READY_WAIT_S:.0f} s")
        if self.current is None and self.off is None:
            self._launch()
        return self.current

    def _launch(self) -> None:
        if self.launches >= LAUNCHES:
            self._turn_off(f"{LAUNCHES} fork servers ended early")
            return
        self.launches += 1
        daemon_end, server_end = protocol.channel_pair()
        try:
            process = subprocess.Popen([*self.command, protocol.FORK_SERVER_FLAG, str(self.cwd)], stdin=server_end,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                       env=self.environment, cwd=self.cwd, close_fds=True)
        except OSError as error:
            daemon_end.close()
            self._turn_off(f"cannot start the fork server: {error}")
            return
        finally:
            server_end.close()
        daemon_end.setblocking(False)
        self.current = ForkServer(process, daemon_end)
        log.info("warm start: fork server pid %s importing torch and the worker", process.pid)

    def _lost(self, server: ForkServer, why: str) -> None:
        log_retired(server, why)
        self._retire(server)

    def _retire(self, server: ForkServer) -> None:
        if server is self.current:
            self.current = None
        server.retire()
        if server.serving or server.process.poll() is None:  # it still reports, or is still to be reaped
            self.retired.append(server)

    def _turn_off(self, why: str) -> None:
        log.warning("warm start off: %s; workers start cold (each imports torch itself)", why)
        self.off = why
        if self.current is not None:
            self._retire(self.current)


def log_retired(server: ForkServer, why: str) -> None:
    code = server.process.poll()
    ended = "" if code is None else f", exit code {code}" if code >= 0 else f", signal {-code}"
    log.warning("warm start: fork server pid %s retired: %s%s; the next start launches another",
                server.process.pid, why, ended)
