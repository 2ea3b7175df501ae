"""V-trace actors in processes of their own: spawned, fed slots through queues, stopped with the learner."""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import queue
import time
import traceback
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rlsup.algos.actors import Actor, Delivery, actor_seed
from rlsup.algos.children import become_child, helper_context, stop_signals_blocked
from rlsup.algos.device import UsageError
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.shared_memory import UnrollArrays, UnrollGroups, UnrollLayout, WeightsBuffer
from rlsup.run.fault_stacks import child_ended
from rlsup.formatting import one_line
from rlsup.run.log import FILE_ONLY
from rlsup.spec import JobSpec, VtraceSection

# At most this many unroll groups per actor: 4 times the fewest, a bound on shared memory and on policy lag.
MAX_GROUPS_PER_ACTOR = 8
# How often a waiting actor, or a learner waiting on actors, looks up from its queue.
POLL_S = 0.2
JOIN_TIMEOUT_S = 10.0
PROCESS_NAME = "rlsup-actor-{index}"

log = logging.getLogger("rlsup.impala")


def groups_per_actor(settings: VtraceSection) -> int:
    """Unroll groups (slots for one round) per actor process: enough that the actors together hold a whole
    batch, the rounds being written included, and never fewer than two.

    An actor whose groups are all full waits for the learner to take one, which it does only between updates:
    with two groups each, Pong's 2 actors x 4 envs (a batch of 32 is 4 rounds each) filled theirs early in a
    1 s CPU update and waited out the rest, then the learner waited 28-29% of its time for the batch they had
    not made. With 4 it waited 0-2%, and 5 gained nothing more (bench/vtrace_throughput.py --also-groups).
    Rounds then wait longer for the learner, so they are up to an update more off-policy, which V-trace
    corrects for; a layout whose round of all actors already fills a batch keeps two.
    """
    rounds_per_batch = -(-settings.batch_size // (settings.actors * settings.envs_per_actor))  # ceil
    return min(max(2, rounds_per_batch), MAX_GROUPS_PER_ACTOR)


class ActorFailure(NamedTuple):
    """What an actor that raised hands the learner before it exits: the learner fails the job with it."""

    actor: int
    pid: int
    summary: str      # an env's fault as its own sentence, else the exception's type and message
    traceback: str
    env_fault: bool   # raised by the actor's envs (an EnvError): the job fails as it would with them in the worker
    starting: bool    # raised while the actor made its envs, before its first round

    @classmethod
    def of(cls, actor: int, error: Exception, *, starting: bool) -> ActorFailure:
        env_fault = isinstance(error, EnvError)
        summary = one_line(str(error)) if env_fault else f"{type(error).__name__}: {one_line(str(error))}"
        return cls(actor, os.getpid(), summary, traceback.format_exc(), env_fault, starting)

    def error(self) -> Exception:
        """The exception the learner raises, its traceback logged (worker.log) first."""
        log.error("V-trace actor %d (pid %d) failed:\n%s", self.actor, self.pid, self.traceback.rstrip(),
                  extra=FILE_ONLY)
        if self.env_fault and self.starting:
            # Envs that cannot be made (or do not fit in memory) stop a job that cannot run as written, as in a
            # worker that makes them itself: exit 2, not a crash to retry.
            return UsageError(self.summary)
        if self.env_fault:
            return EnvError(self.summary)
        return RuntimeError(f"V-trace actor {self.actor} (pid {self.pid}) failed: {self.summary}")


@dataclass
class ActorContext:
    """What a spawned actor process is handed (picklable: shared tensors travel as file descriptors)."""

    spec: JobSpec
    index: int
    seed: np.random.SeedSequence
    groups: UnrollGroups
    weights: WeightsBuffer
    free_groups: object    # multiprocessing queue of group numbers the actor may fill
    full_groups: object    # multiprocessing queue of Delivery (or an error text) back to the learner
    stop: object           # multiprocessing event: the learner asks the actors to finish
    learner_alive: object  # read end of a pipe only the learner holds open for writing: end of file once it died


class ActorProcesses:
    """Actors in spawned processes writing rounds into shared slots; the learner reads and frees them.

    Made with the trainer but started at its first iteration, after any restore: the update count
    seeds the processes, and the weights they start from are the restored ones."""

    def __init__(self, spec: JobSpec, layout: UnrollLayout, network: nn.Module):
        self.spec, self.layout, self.network = spec, layout, network
        self.weights: WeightsBuffer | None = None
        self.processes = []
        self.started = self.closed = False

    def start(self, generation: int) -> None:
        self._make_processes(generation)
        self.started = True
        with stop_signals_blocked():
            for process in self.processes:
                process.start()
        # Whatever way the learner leaves (an exception past its own close, say), the actors must be
        # stopped first: multiprocessing's exit handler would only SIGTERM them, which they ignore, and
        # then wait for them for ever. Registered after multiprocessing's, so it runs before it.
        atexit.register(self.close)
        log.info("started %d V-trace actor processes (pids %s)", len(self.processes),
                 " ".join(map(str, self.pids)))

    def _make_processes(self, generation: int) -> None:
        """The shared slots and weights, the queues, and one process per actor, not yet started."""
        self.context = helper_context()
        spec, count = self.spec, self.spec.vtrace.actors
        self.weights = WeightsBuffer(self.network, lock=self.context.Lock(), shared=True)
        self.groups = UnrollGroups(self.layout, count * groups_per_actor(spec.vtrace), shared=True)
        self.free_groups = self.context.Queue()
        self.full_groups = self.context.Queue()
        self.stop = self.context.Event()
        self.alive_reader, self.alive_writer = self.context.Pipe(duplex=False)  # never written: only held
        for group in range(self.groups.groups):
            self.free_groups.put(group)
        for index in range(count):
            context = ActorContext(spec, index, actor_seed(spec.job.seed, index, generation), self.groups,
                                   self.weights, self.free_groups, self.full_groups, self.stop, self.alive_reader)
            # daemon: multiprocessing's exit handler terminates them if close() is never reached.
            process = self.context.Process(target=run_actor_process, args=(context,),
                                           name=PROCESS_NAME.format(index=index), daemon=True)
            self.processes.append(process)

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes if process.pid is not None]

    def receive(self, timeout: float) -> list[Delivery]:
        """Every round finished so far, waiting up to timeout for the first one."""
        deliveries = []
        deadline = time.monotonic() + timeout
        while True:
            wait = max(0.0, deadline - time.monotonic()) if not deliveries else 0.0
            try:
                message = self.full_groups.get(timeout=min(wait, POLL_S)) if wait else self.full_groups.get_nowait()
            except queue.Empty:
                if deliveries or time.monotonic() >= deadline:
                    self._check_alive()
                    return deliveries
                self._check_alive()
                continue
            if isinstance(message, ActorFailure):
                raise message.error()
            deliveries.append(message)

    def _check_alive(self) -> None:
        for process in self.processes:
            if process.exitcode is not None:
                failure = self._reported_failure()
                if failure is not None:
                    raise failure.error()
                raise child_ended(f"V-trace actor {process.name} (pid {process.pid})", process.exitcode,
                                  "while the learner needed it")

    def _reported_failure(self) -> ActorFailure | None:
        """An actor that failed put its report in the pipe before exiting: it says more than an exit code."""
        with contextlib.suppress(queue.Empty, OSError, ValueError):
            while True:
                if isinstance(message := self.full_groups.get_nowait(), ActorFailure):
                    return message
        return None

    def arrays(self, group: int) -> UnrollArrays:
        return self.groups.group(group)

    def release(self, group: int) -> None:
        self.free_groups.put(group)

    def publish(self, network: nn.Module) -> None:
        # Before start there is no buffer yet: start copies the network as it is then.
        if self.weights is not None:
            self.weights.publish(network)

    def state_dict(self) -> None:
        """None: the rounds in flight are lost on resume, as asynchronous actors are not reproducible anyway."""
        return None

    def load_state_dict(self, state: dict) -> list[str]:
        """Nothing to continue (a serial run's actors, say): processes start afresh, seeded by their generation."""
        return []

    def close(self) -> None:
        """Ask the actors to stop, wait for them, and kill any that do not go (none may outlive this)."""
        atexit.unregister(self.close)
        if self.closed or not self.started:
            self.closed = True
            return
        self.closed = True
        self.stop.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for process in self.processes:
            while process.pid is not None and process.is_alive() and time.monotonic() < deadline:
                self._drain()  # an actor blocked on a full pipe could not see the stop flag
                process.join(timeout=POLL_S)
        for process in self.processes:
            if process.pid is not None and process.is_alive():
                process.kill()
                process.join(timeout=JOIN_TIMEOUT_S)
        self._drain()
        # Join the feeder thread of each queue rather than leave it: it holds two of the queue's semaphores, and
        # one dropped in it as the worker's os._exit struck was unlinked without the resource tracker being told,
        # which then printed a "leaked semaphore" warning after the run's last sentence. The join cannot hang:
        # only group numbers, fewer than the pipe holds, ever wait in it, and this process owns its reading end.
        for channel in (self.free_groups, self.full_groups):
            channel.close()
            channel.join_thread()
        self.alive_reader.close()
        self.alive_writer.close()

    def _drain(self) -> None:
        with contextlib.suppress(queue.Empty, OSError, ValueError):
            while True:
                self.full_groups.get_nowait()


def run_actor_process(context: ActorContext) -> None:
    """An actor process: rounds until the learner says stop or is gone, whichever comes first."""
    become_child(PROCESS_NAME.format(index=context.index))
    torch.set_num_threads(1)
    actor = None
    try:
        actor = Actor(context.spec, context.index, context.seed)
        while (group := take_free_group(context)) is not None:
            episodes = actor.unroll(context.weights, context.groups.group(group))
            context.full_groups.put(Delivery(group, context.index, episodes))
    except Exception as error:  # reported to the learner, which fails the job with it
        report_failure(context, ActorFailure.of(context.index, error, starting=actor is None))
        raise SystemExit(1) from None
    finally:
        # Never wait at exit for the learner to read what is still in the pipe: it may be gone.
        context.full_groups.cancel_join_thread()
        if actor is not None:
            with contextlib.suppress(Exception):  # leaving anyway; a failure to close says nothing new
                actor.close()


def report_failure(context: ActorContext, failure: ActorFailure) -> None:
    """Put the failure in the pipe and wait until it is written: put only hands it to the queue's feeder
    thread, which exiting at once would stop first (the learner then saw only "exited with code 0")."""
    with contextlib.suppress(Exception):  # a learner that is gone has nobody to tell
        context.full_groups.put(failure)
        context.full_groups.close()
        context.full_groups.join_thread()


def take_free_group(context: ActorContext) -> int | None:
    """The next group to fill, or None once the learner asks to stop or has died."""
    while not context.stop.is_set() and learner_alive(context.learner_alive):
        try:
            return context.free_groups.get(timeout=POLL_S)
        except queue.Empty:
            continue
    return None


def learner_alive(reader) -> bool:
    """Whether the learner still holds the pipe's write end: the kernel closes it when the learner dies, even by
    SIGKILL, and a pipe, unlike a pid, is never reused (actors' parent is the fork server, not the learner)."""
    try:
        return not reader.poll()  # nothing is ever written, so ready means end of file
    except (OSError, EOFError):
        return False
