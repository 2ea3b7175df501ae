"""A DQN learner's rounds in a process of its own, on networks and optimizer state in shared memory.

Beside the envs on a second core, a small network's update runs free of Python's lock, which a learner
thread shares with the envs (a MinAtar network's dozens of short kernels make both sides wait on it). The
process changes nothing of the run: it takes the same batches at the same steps and runs the same update on
the same tensors as the thread would, and the schedule alone decides when the worker reads them.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import time
import traceback
from dataclasses import dataclass

import torch
from torch import nn

from rlsup.algos.children import become_child, helper_context, stop_signals_blocked
from rlsup.algos.dqn_learner import DqnLearner
from rlsup.formatting import one_line
from rlsup.run.fault_stacks import child_ended
from rlsup.run.log import FILE_ONLY

PROCESS_NAME = "rlsup-learner"
JOIN_TIMEOUT_S = 10.0
SPIN_S = 0.02

log = logging.getLogger("rlsup.dqn")


@dataclass
class LearnerContext:
    """What the spawned learner is handed (picklable: shared tensors travel as file descriptors)."""

    settings: object                 # DqnSection
    online: nn.Module
    target: nn.Module
    optimizer_state: list[dict]      # per parameter of online, in order: the optimizer's shared state
    threads: int                     # torch's intra-op threads, as the worker's: the same kernels, the same sums


class LearnerProcess:
    """Runs a DqnLearner's rounds in a spawned process; the learner's tensors are shared with it.

    Started at the first round, after any restore, and again after a restore replaces the optimizer's state
    tensors. Between rounds (the only time the worker reads or writes the learner) the process is idle."""

    def __init__(self, learner: DqnLearner) -> None:
        self.learner = learner
        self.process = None
        self.connection = None
        self.state_shared: list[dict] | None = None
        self.running = False
        # Wall seconds the rounds ran, and that the caller waited in collect(): bench/dqn_overlap.py reads them.
        self.round_seconds = 0.0
        self.waited_seconds = 0.0

    @property
    def round(self) -> bool:
        return self.running

    def start(self, batches: list, step: int) -> None:
        if self.running:
            raise RuntimeError("a learner round is still running: collect it before starting another")
        if self.process is None or not self._state_still_shared():
            self._start_process()
        try:
            self.connection.send(("round", batches, step))
        except OSError:  # it died between rounds: a broken pipe, said as the death it is
            raise self._ended("when a round was sent to it") from None
        self.running = True

    def collect(self) -> list[dict] | None:
        """Wait for the running round (None if none) and return its losses; its failure is raised here."""
        if not self.running:
            return None
        self.running = False
        began = time.perf_counter()
        try:
            spin_until_readable(self.connection)
            reply = self.connection.recv()
        except (EOFError, OSError):
            raise self._ended("during a round") from None
        finally:
            self.waited_seconds += time.perf_counter() - began
        kind, *payload = reply
        if kind == "failed":
            summary, trace = payload
            log.error("the DQN learner process (pid %d) failed:\n%s", self.process.pid, trace.rstrip(),
                      extra=FILE_ONLY)
            raise RuntimeError(f"the DQN learner process (pid {self.process.pid}) failed: {summary}")
        losses, seconds = payload
        self.round_seconds += seconds
        self.learner.updates += len(losses)
        return [{name: torch.tensor(value, dtype=torch.float32) for name, value in update.items()}
                for update in losses]

    def _ended(self, when: str) -> RuntimeError:
        self.process.join(timeout=JOIN_TIMEOUT_S)
        return child_ended(f"the DQN learner process (pid {self.process.pid})", self.process.exitcode, when)

    def _state_still_shared(self) -> bool:
        """False once a restore has put new tensors in the optimizer's state: the process must have those."""
        states = self._optimizer_states()
        return len(states) == len(self.state_shared) and all(
            now is then or (now is not None and then is not None and all(now[key] is then[key] for key in then))
            for now, then in zip(states, self.state_shared))

    def _optimizer_states(self) -> list[dict]:
        optimizer = self.learner.optimizer
        return [optimizer.state.get(parameter) for parameter in optimizer.parameters]

    def _start_process(self) -> None:
        """Move the learner's tensors to shared memory and hand them to a fresh process."""
        self.close()
        learner = self.learner
        learner.optimizer.materialize_state()
        learner.online.share_memory()
        learner.target.share_memory()
        states = self._optimizer_states()
        for state in states:
            for tensor in state.values():
                tensor.share_memory_()
        context = helper_context()
        self.connection, child_end = context.Pipe()
        settings = dataclasses.replace(learner.settings, overlap=False)  # the child needs no acting copy
        learner_context = LearnerContext(settings, learner.online, learner.target, states, torch.get_num_threads())
        # daemon: multiprocessing's exit handler terminates it if close() is never reached.
        self.process = context.Process(target=run_learner_process, args=(learner_context, child_end),
                                       name=PROCESS_NAME, daemon=True)
        with stop_signals_blocked():
            self.process.start()
        child_end.close()  # so that the worker reads EOF, not silence, once the child is gone
        # As for V-trace's actors: multiprocessing's exit handler would SIGTERM a child that ignores it and
        # then wait for it for ever; this one, registered after it, runs first.
        atexit.register(self.close)
        self.state_shared = [dict(state) for state in states]
        log.info("started the DQN learner process (pid %d)", self.process.pid)

    def close(self) -> None:
        """Wait for a running round, whatever it did, then stop the process (killed if it does not go)."""
        atexit.unregister(self.close)
        if self.process is None:
            return
        with contextlib.suppress(Exception):  # closing anyway: a failed round was raised where it was collected
            if self.running:
                self.connection.recv()
        self.running = False
        with contextlib.suppress(OSError):
            self.connection.send(("stop",))
        self.process.join(timeout=JOIN_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=JOIN_TIMEOUT_S)
        self.connection.close()
        self.process = self.connection = self.state_shared = None


def run_learner_process(context: LearnerContext, connection) -> None:
    """The learner process: a round per message until told to stop or the worker is gone."""
    become_child(PROCESS_NAME)
    torch.set_num_threads(context.threads)
    learner = shared_learner(context)
    while True:
        try:
            spin_until_readable(connection)
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message[0] != "round":
            return
        _, batches, step = message
        began = time.perf_counter()
        try:
            losses = [{name: float(value) for name, value in learner.update(batch, step).items()}
                      for batch in batches]
        except Exception as error:  # reported to the worker, which fails the job with it
            connection.send(("failed", f"{type(error).__name__}: {one_line(str(error))}", traceback.format_exc()))
            return
        connection.send(("done", losses, time.perf_counter() - began))


def shared_learner(context: LearnerContext) -> DqnLearner:
    """A DqnLearner whose networks and optimizer state are the worker's, through shared memory."""
    learner = DqnLearner(context.settings, context.online, torch.device("cpu"))
    learner.target = context.target
    learner.optimizer.state = {parameter: state for parameter, state
                               in zip(learner.optimizer.parameters, context.optimizer_state)}
    return learner


def spin_until_readable(connection, seconds: float = SPIN_S) -> None:
    """Poll without sleeping for a while before a blocking read: a round trip is a few milliseconds, and a
    process that sleeps between them wakes late (on a virtual machine, hundreds of microseconds each time).
    Each poll yields the core first: where the other side waits for one (a busy machine), it runs at once,
    and on an idle core the yield returns at once. Measured on 2 cores: MinAtar DQN with overlap, 8,000
    steps, 16.1-18.3 s against 18.2-19.5 s with a plain spin (20.9-23.6 s without spinning) when alone,
    and the overlap tests 120 s against 139 s as two at once."""
    deadline = time.perf_counter() + seconds
    while not connection.poll() and time.perf_counter() < deadline:
        os.sched_yield()
