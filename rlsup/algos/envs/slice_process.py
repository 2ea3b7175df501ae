"""One process of the subprocess vectoriser: a slice of a vector's envs, stepped on its parent's commands."""
from __future__ import annotations

import signal
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable

from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.memory import make_envs
from rlsup.algos.envs.vector import SerialVectorEnv
from rlsup.run.fault_stacks import record_where_the_worker_does
from rlsup.run.float_mode import inherit_flush_denormals
# The worker's own signals (pause and reload): an env process leaves them to the worker.
from rlsup.run.signals import LISTENED_SIGNALS as WORKER_SIGNALS
from rlsup.spec import EnvSection

# What the parent may ask of a running slice; each command is answered by exactly one reply.
COMMANDS: dict[str, Callable[[SerialVectorEnv, Any], Any]] = {
    "reset": lambda vector, _: vector.reset(),
    "step": lambda vector, actions: vector.step(actions),
    "state_dict": lambda vector, _: vector.state_dict(),
    "load_state_dict": lambda vector, state: vector.load_state_dict(state),
}


def serve(descriptor: int) -> None:
    """Make the slice the parent describes, then answer its commands until it says close or is gone.

    Replies are ("ok", value) or ("error", kind, summary, traceback); kind "env" is an EnvError, which the
    parent raises as one so that a bad env reads as it would without subprocesses.
    """
    # The worker decides when a pause happens: a terminal's Ctrl-C reaches the whole process group,
    # and must not kill a slice the worker still has to capture. The parent blocked these while starting us.
    for signum in WORKER_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, WORKER_SIGNALS)
    record_where_the_worker_does()
    inherit_flush_denormals()  # the worker's float mode, which imports torch only where it flushes
    connection = Connection(descriptor)
    vector: SerialVectorEnv | None = None
    try:
        _, (env, seeds, first_index, total) = connection.recv()
        vector = _answer(connection, lambda: _make_slice(env, seeds, first_index, total))
        while vector is not None:
            command, argument = connection.recv()
            if command == "close":
                break
            _answer(connection, lambda: COMMANDS[command](vector, argument))
    except (EOFError, OSError):
        pass  # the parent is gone (its end of the socket closed with it): nothing is left to serve
    finally:
        if vector is not None:
            vector.close()
        connection.close()


class LocalSlice:
    """The first slice of a subprocess vector, stepped by its owner while the env processes step theirs:
    one process fewer, and work for an owner that would otherwise only wait. It answers as they do."""

    pid = None

    def __init__(self, env: EnvSection, seeds: list[int], first_index: int, total: int) -> None:
        self.first_index, self.end_index = first_index, first_index + len(seeds)
        self.vector = _make_slice(env, seeds, first_index, total)
        self._command: tuple[str, Any] = ("make", None)

    def send(self, command: str, argument: Any = None) -> None:
        """Kept until receive, which the owner calls once it has sent the env processes their commands."""
        self._command = (command, argument)

    def receive(self, command: str) -> Any:
        sent, argument = self._command
        return _reply_value(self.vector) if sent == "make" else COMMANDS[sent](self.vector, argument)

    def close(self) -> None:
        self.vector.close()


def _make_slice(env: EnvSection, seeds: list[int], first_index: int, total: int) -> SerialVectorEnv:
    """total: the envs of the whole vector, which its other slices make at the same time."""
    return SerialVectorEnv(make_envs(env, seeds, total), first_index)


def _answer(connection: Connection, work: Callable[[], Any]) -> Any:
    """Run one command and send its reply; the value, or None where it raised."""
    try:
        value = work()
    except Exception as error:  # an env may fail in any way: the parent reports it, then stops the job
        kind = "env" if isinstance(error, EnvError) else "other"
        connection.send(("error", kind, f"{type(error).__name__}: {error}", traceback.format_exc()))
        return None
    connection.send(("ok", _reply_value(value)))
    return value


def _reply_value(value: Any) -> Any:
    """What the parent needs of a made slice is its observation layout and actions, not the slice."""
    if isinstance(value, SerialVectorEnv):
        return value.envs[0].layout, value.actions
    return value
