"""The subprocess vectoriser: a vector's envs in slices, each in a process of its own, stepped at once."""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import signal
import subprocess
import sys
from typing import Any

import numpy as np

from rlsup.algos.envs.capture import EnvRestart
from rlsup.algos.envs.slice_process import WORKER_SIGNALS, LocalSlice
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.vector import VectorStep, check_env_count
from rlsup.run.fault_stacks import ChildFault, child_ended
from rlsup.hardware import usable_cpus
from rlsup.run.log import FILE_ONLY
from rlsup.spec import EnvSection

# The program an env process runs: the socket's descriptor is its one argument. Its first statement takes off
# sys.path the "" that -c puts first, the cwd: a foreground run's may be the run directory, someone else's.
PROCESS_PROGRAM = ("import sys; sys.path[:] = [entry for entry in sys.path if entry]; "
                   "from rlsup.run.import_trust import take_handed_down; take_handed_down(); "
                   "from rlsup.algos.envs.slice_process import serve; serve(int(sys.argv[1]))")
CLOSE_TIMEOUT_S = 10.0

log = logging.getLogger("rlsup.envs")


class EnvProcessError(RuntimeError):
    """An env that raised inside its process, or an env process that died."""


def default_slices() -> int:
    """One slice per usable CPU, and two at least: "subprocess" always steps some envs in another process."""
    return max(2, usable_cpus())


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

    def __init__(self, env: EnvSection, seeds: list[int], first_index: int, total: int) -> None:
        self.first_index, self.end_index = first_index, first_index + len(seeds)
        self.env_id = env.id
        self.connection, child = multiprocessing.Pipe(duplex=True)
        # Blocked, not ignored, while it starts (the mask survives fork and exec): see env_process.serve.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, WORKER_SIGNALS)
        try:
            # It imports rlsup and [env] imports where this process does: the user's PYTHONPATH, what is
            # installed, and the run's trusted import paths (import_trust.hand_down). Never this sys.path as
            # its PYTHONPATH: that put a received run's import paths first, and ran their sitecustomize.py.
            self.process = subprocess.Popen([sys.executable, "-c", PROCESS_PROGRAM, str(child.fileno())],
                                            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
            child.close()  # only the child holds this end now: its end of file is our death
        self.send("make", (env, seeds, first_index, total))

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
        log.error("%s raised during %s:\n%s", self.describe(), command, remote_traceback.rstrip(), extra=FILE_ONLY)
        if kind == "env":
            raise EnvError(summary.partition(": ")[2])
        raise EnvProcessError(f"{summary} (raised by {self.describe()} during {command}; its traceback is in "
                              f"the log)")

    def _raise_exited(self, command: str) -> None:
        try:
            code = self.process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            code = None
        error = child_ended(self.describe(), code, f"during {command}")
        raise (error if isinstance(error, ChildFault) else EnvProcessError(str(error))) from None

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


class SubprocessVectorEnv:
    """The VectorEnv of a batch split into contiguous slices, one per usable CPU (two at least): the first
    stepped in this process, each other one in an env process of its own, all at once.

    Each slice is a SerialVectorEnv numbered from its first env, so state_dict keys, seeds and
    trajectories are those of the serial vectoriser: a run may switch between the two across a pause.
    """

    def __init__(self, env: EnvSection, seeds: list[int], slices: int | None = None) -> None:
        if not seeds:
            raise ValueError("a vector needs at least one env")
        self.num_envs = len(seeds)
        self.slices: list[LocalSlice | EnvProcess] = []
        try:
            (first, end), *others = slice_bounds(self.num_envs, slices or default_slices())
            # The env processes first, so that they start up while this one makes its own slice.
            for other_first, other_end in others:
                self.slices.append(EnvProcess(env, seeds[other_first:other_end], other_first, self.num_envs))
            self.slices.insert(0, LocalSlice(env, seeds[first:end], first, self.num_envs))
            self.layout, self.actions = [part.receive("make") for part in self.slices][0]
        except BaseException:
            self.close()
            raise
        log.info("stepping %d %s envs, %d in this process and the rest in %d env processes (pids %s)",
                 self.num_envs, env.id, end - first, len(self.pids), " ".join(map(str, self.pids)))
        self.observation_shape: tuple = self.layout.shape
        self.observation_dtype = self.layout.dtype
        self.frame_shape: tuple = self.layout.frame_shape
        self.stack_size = self.layout.stack_size
        self.num_actions = self.actions.count

    @property
    def pids(self) -> list[int]:
        return [part.pid for part in self.slices if part.pid is not None]

    def _ask_all(self, command: str, arguments: list | None = None) -> list:
        """Send every slice its command first and only then wait, so that the slices work at once (the local
        slice, first, does its work in receive)."""
        for index, part in enumerate(self.slices):
            part.send(command, None if arguments is None else arguments[index])
        replies, failure = [], None
        for part in self.slices:
            # Every reply is read even after a failure, so that the next command's replies are its own.
            try:
                replies.append(part.receive(command))
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure
        return replies

    def reset(self) -> np.ndarray:
        return np.concatenate(self._ask_all("reset"))

    def step(self, actions: np.ndarray) -> VectorStep:
        actions = np.asarray(actions)
        parts = self._ask_all("step", [actions[part.first_index:part.end_index] for part in self.slices])
        return _joined(parts, [part.first_index for part in self.slices])

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        return self.layout.newest_frame(observation)

    def state_dict(self) -> dict:
        state: dict = {}
        for part in self._ask_all("state_dict"):
            state.update(part)
        return state

    def load_state_dict(self, state: dict) -> list[EnvRestart]:
        check_env_count(state, self.num_envs)
        states = [{str(index): state[str(index)] for index in range(part.first_index, part.end_index)}
                  for part in self.slices]
        return [restart for restarts in self._ask_all("load_state_dict", states) for restart in restarts]

    def close(self) -> None:
        for part in self.slices:
            part.close()
        self.slices = []


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
