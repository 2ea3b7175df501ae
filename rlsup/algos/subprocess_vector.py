"""The subprocess vectoriser: a vector's envs in slices, each in a process of its own, stepped at once."""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
from typing import Any

import numpy as np

from rlsup.algos.env_capture import EnvRestart
from rlsup.algos.env_process import STOP_SIGNALS
from rlsup.algos.env_sources import EnvError
from rlsup.algos.vector import VectorStep, check_env_count
from rlsup.spec import EnvSection

# The program an env process runs: the socket's descriptor is its one argument.
PROCESS_PROGRAM = "import sys; from rlsup.algos.env_process import serve; serve(int(sys.argv[1]))"
CLOSE_TIMEOUT_S = 10.0

log = logging.getLogger("rlsup.envs")


class EnvProcessError(RuntimeError):
    """An env that raised inside its process, or an env process that died."""


def usable_cpus() -> int:
    with contextlib.suppress(AttributeError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def slice_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """(first, end) of each of `parts` contiguous slices of `count` envs, sizes differing by one at most."""
    parts = max(1, min(parts, count))
    size, extra = divmod(count, parts)
    bounds, first = [], 0
    for part in range(parts):
        end = first + size + (part < extra)
        bounds.append((first, end))
        first = end
    return bounds


class EnvProcess:
    """One slice of the vector in its own Python process, talked to over a socket pair.

    The process is started with subprocess, not multiprocessing, because a V-trace actor is a daemonic
    multiprocessing process, which multiprocessing forbids to have children. It exits when its socket
    reaches end of file, so it dies with the worker, even one killed by SIGKILL.
    """

    def __init__(self, env: EnvSection, seeds: list[int], first_index: int) -> None:
        self.first_index, self.end_index = first_index, first_index + len(seeds)
        self.env_id = env.id
        self.connection, child = multiprocessing.Pipe(duplex=True)
        # Blocked, not ignored, while it starts (the mask survives fork and exec): see env_process.serve.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            self.process = subprocess.Popen([sys.executable, "-c", PROCESS_PROGRAM, str(child.fileno())],
                                            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                            env=_child_environment())
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            child.close()  # only the child holds this end now: its end of file is our death
        self.send("make", (env, seeds, first_index))

    @property
    def pid(self) -> int:
        return self.process.pid

    def describe(self) -> str:
        return f"the env process of envs {self.first_index}-{self.end_index - 1} ({self.env_id}, pid {self.pid})"

    def send(self, command: str, argument: Any = None) -> None:
        try:
            self.connection.send((command, argument))
        except OSError:
            self._raise_exited(command)

    def receive(self, command: str) -> Any:
        """The reply to the command sent last; raises what the env raised, or that the process died."""
        try:
            reply = self.connection.recv()
        except (EOFError, OSError):
            self._raise_exited(command)
        if reply[0] == "ok":
            return reply[1]
        _, kind, summary, remote_traceback = reply
        log.error("%s raised during %s:\n%s", self.describe(), command, remote_traceback.rstrip())
        if kind == "env":
            raise EnvError(summary.partition(": ")[2])
        raise EnvProcessError(f"{summary} (raised by {self.describe()} during {command}; its traceback is in "
                              f"the log)")

    def _raise_exited(self, command: str) -> None:
        try:
            code = self.process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        raise EnvProcessError(f"{self.describe()} exited with code {code} during {command}") from None

    def close(self) -> None:
        """Ask the process to close its envs and exit; kill it if it does not."""
        with contextlib.suppress(OSError):
            self.connection.send(("close", None))
        try:
            self.process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.connection.close()


def _child_environment() -> dict:
    # The child imports what this process can: rlsup itself, and the modules [env] imports names.
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(entry for entry in sys.path if entry)
    return environment


class SubprocessVectorEnv:
    """The VectorEnv of a batch split into contiguous slices, one process each (one per usable CPU).

    Each slice is a SerialVectorEnv numbered from its first env, so state_dict keys, seeds and
    trajectories are those of the serial vectoriser: a run may switch between the two across a pause.
    """

    def __init__(self, env: EnvSection, seeds: list[int], processes: int | None = None) -> None:
        if not seeds:
            raise ValueError("a vector needs at least one env")
        self.num_envs = len(seeds)
        self.processes: list[EnvProcess] = []
        try:
            for first, end in slice_bounds(self.num_envs, processes or usable_cpus()):
                self.processes.append(EnvProcess(env, seeds[first:end], first))
            self.layout, self.num_actions = [process.receive("make") for process in self.processes][0]
        except BaseException:
            self.close()
            raise
        log.info("stepping %d %s envs in %d env processes (pids %s)", self.num_envs, env.id, len(self.processes),
                 " ".join(map(str, self.pids)))
        self.observation_shape: tuple = self.layout.shape
        self.observation_dtype = self.layout.dtype
        self.frame_shape: tuple = self.layout.frame_shape
        self.stack_size = self.layout.stack_size

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def _ask_all(self, command: str, arguments: list | None = None) -> list:
        """Send every slice its command first and only then wait, so that the slices work at once."""
        for index, process in enumerate(self.processes):
            process.send(command, None if arguments is None else arguments[index])
        return [process.receive(command) for process in self.processes]

    def reset(self) -> np.ndarray:
        return np.concatenate(self._ask_all("reset"))

    def step(self, actions: np.ndarray) -> VectorStep:
        actions = np.asarray(actions)
        parts = self._ask_all("step", [actions[process.first_index:process.end_index] for process in self.processes])
        return _joined(parts, [process.first_index for process in self.processes])

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        return self.layout.newest_frame(observation)

    def state_dict(self) -> dict:
        state: dict = {}
        for part in self._ask_all("state_dict"):
            state.update(part)
        return state

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        check_env_count(state, self.num_envs)
        slices = [{str(index): state[str(index)] for index in range(process.first_index, process.end_index)}
                  for process in self.processes]
        return [restart for part in self._ask_all("load_state_dict", slices) for restart in part]

    def close(self) -> None:
        for process in self.processes:
            process.close()
        self.processes = []


def _joined(parts: list[VectorStep], firsts: list[int]) -> VectorStep:
    """One VectorStep of the whole vector from those of its slices, each dict re-keyed by the env's number."""
    def concatenated(name: str) -> np.ndarray:
        return np.concatenate([getattr(part, name) for part in parts])

    def merged(name: str) -> dict:
        return {first + index: value for part, first in zip(parts, firsts)
                for index, value in getattr(part, name).items()}

    return VectorStep(concatenated("observations"), concatenated("rewards"), concatenated("terminals"),
                      concatenated("dones"), concatenated("truncated"), merged("final_observations"),
                      merged("episodes"))
