"""V-trace actors: the unroll loop that serial and parallel modes share, and the processes that run it."""
from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import queue
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from rlsup.algos.device import UsageError
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.nets import PolicyValueNetwork, build_policy_value_network
from rlsup.algos.shared_memory import UnrollArrays, UnrollGroups, UnrollLayout, WeightsBuffer
from rlsup.algos.envs.vector import VectorStep, env_seeds, make_vector_env
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.run.fault_stacks import child_ended, record_where_the_worker_does
from rlsup.run.signals import STOP_SIGNALS  # an actor ignores a pause's signals: the learner decides
from rlsup.formatting import one_line
from rlsup.worker.progress import FILE_ONLY
from rlsup.spec import JobSpec

# Seed-sequence key of the actors' streams, apart from the learner's (spawned from the bare job seed).
ACTOR_SEED_KEY = 1
# Unroll groups per actor: one being written while the learner copies the previous one out.
GROUPS_PER_ACTOR = 2
# How often a waiting actor, or a learner waiting on actors, looks up from its queue.
POLL_S = 0.2
JOIN_TIMEOUT_S = 10.0
PR_SET_NAME, PR_SET_PDEATHSIG = 15, 1
PROCESS_NAME = "rlsup-actor-{index}"

log = logging.getLogger("rlsup.impala")


class Delivery(NamedTuple):
    """A finished round: which group of slots holds its unrolls, and the episodes that ended in it."""

    group: int
    actor: int
    episodes: list[dict]


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


def actor_seed(job_seed: int, actor: int, generation: int = 0) -> np.random.SeedSequence:
    """The root of one actor's streams: its env seeds and its action sampling."""
    return np.random.SeedSequence(job_seed, spawn_key=(ACTOR_SEED_KEY, actor, generation))


def build_actor_network(spec: JobSpec, observation_shape: tuple, num_actions: int) -> PolicyValueNetwork:
    # Its initial weights are overwritten by the first load; fork_rng keeps building it from using up
    # the process's global torch stream, which in serial mode is the learner's.
    with torch.random.fork_rng(devices=[]):
        network = build_policy_value_network(observation_shape, num_actions, spec.vtrace.hidden_sizes,
                                             spec.vtrace.feature_size, spec.vtrace.network)
    return network.requires_grad_(False).eval()


class Actor:
    """Steps envs_per_actor envs as one batch with a CPU copy of the policy (one forward per step) and
    writes one unroll per env each round.

    Consecutive unrolls overlap by one state: the last observation of one is the first of the next.
    """

    def __init__(self, spec: JobSpec, index: int, seed: np.random.SeedSequence):
        settings = spec.vtrace
        # Envs first, then sampling: the order of these spawns fixes the run.
        seeds = env_seeds(seed, settings.envs_per_actor)
        sampling_seed = seed.spawn(1)[0]
        self.index = index
        self.unroll_length = settings.unroll_length
        self.discount = settings.gamma
        # Actor processes share the machine: each vector may use its share of the CPUs (see choose_vectoriser).
        self.envs = make_vector_env(spec.env, seeds, sharers=1 if settings.serial else settings.actors)
        self.network = build_actor_network(spec, self.envs.observation_shape, self.envs.num_actions)
        self.sampling = np.random.Generator(np.random.PCG64(sampling_seed))
        self.weights_version = -1
        self.observations = self.envs.reset()
        self.cached_output: tuple[np.ndarray, np.ndarray] | None = None

    def unroll(self, weights: WeightsBuffer, arrays: UnrollArrays) -> list[dict]:
        """One round: unroll_length steps of every env, written into arrays; returns the finished episodes."""
        self._refresh_weights(weights)
        logits, features = self.cached_output or self._forward(self.observations)
        episodes = []
        for time_step in range(self.unroll_length):
            arrays.observations[:, time_step] = self.observations
            arrays.features[:, time_step] = features
            arrays.behaviour_logits[:, time_step] = logits
            actions = self._sample(logits)
            arrays.actions[:, time_step] = actions
            result = self.envs.step(actions)
            self._store(result, arrays, time_step)
            episodes.extend({"kind": "episode", "return": episode.raw_return, "length": episode.length}
                            for _, episode in sorted(result.episodes.items()))
            self.observations = result.observations
            logits, features = self._forward(self.observations)
        arrays.observations[:, self.unroll_length] = self.observations
        arrays.features[:, self.unroll_length] = features
        # The next round acts first on these same observations: reuse this pass unless the weights change.
        self.cached_output = (logits, features)
        return episodes

    def _refresh_weights(self, weights: WeightsBuffer) -> None:
        version = weights.load_into(self.network, self.weights_version)
        if version != self.weights_version:
            self.weights_version, self.cached_output = version, None

    def _store(self, result: VectorStep, arrays: UnrollArrays, time_step: int) -> None:
        rewards = result.rewards.copy()
        for env_index, final_observation in result.final_observations.items():
            if result.truncated[env_index] and not result.terminals[env_index]:
                # A time limit is not the end of the task, but the next state stored is the new episode's:
                # fold the bootstrap from the true last state into the reward (Pardo et al. 2018). One
                # forward per such env, not one batch: a batch of another size may round differently.
                rewards[env_index] += self.discount * self._value(final_observation)
        arrays.rewards[:, time_step] = rewards
        # A lost life cuts the bootstrap too; after a done the next observation is a new episode's.
        arrays.dones[:, time_step] = result.terminals | result.dones

    @torch.no_grad()
    def _value(self, observation: np.ndarray) -> float:
        return float(self.network(torch.from_numpy(observation[None])).values[0])

    @torch.no_grad()
    def _forward(self, observations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        output = self.network(torch.from_numpy(observations))
        return output.logits.numpy(), output.features.numpy()

    def _sample(self, logits: np.ndarray) -> np.ndarray:
        """One action per env from softmax(logits), by inverse CDF on one uniform draw each."""
        shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted)
        cumulative = np.cumsum(probabilities / probabilities.sum(axis=1, keepdims=True), axis=1)
        uniforms = self.sampling.random(len(logits))
        actions = (uniforms[:, None] >= cumulative).sum(axis=1)
        return np.minimum(actions, logits.shape[1] - 1).astype(np.int64)

    def state_dict(self) -> dict:
        """Envs mid-episode, their observations and the sampling stream; the weights come from the learner."""
        return {"envs": self.envs.state_dict(),
                "observations": self.observations.copy(), "sampling": generator_state(self.sampling)}

    def load_state_dict(self, state: dict) -> list[str]:
        """Continue from state_dict(); returns a sentence per env that had to start a fresh episode."""
        restarts = self.envs.load_state_dict(state["envs"])
        self.observations = np.array(state["observations"], dtype=self.observations.dtype)
        for restart in restarts:  # the next unroll starts on the fresh episode: no step joins the two
            self.observations[restart.index] = restart.observation
        self.sampling = restore_generator(state["sampling"])
        self.weights_version, self.cached_output = -1, None
        return [f"actor {self.index}, {restart.reason}" for restart in restarts]

    def close(self) -> None:
        self.envs.close()


# ---- serial mode: the actors called inline ---------------------------------------------------------


class SerialActors:
    """Every actor in the learner's process, one round at a time in turn: debuggable and bit-exact."""

    def __init__(self, spec: JobSpec, layout: UnrollLayout, network: nn.Module):
        self.actors = [Actor(spec, index, actor_seed(spec.job.seed, index)) for index in range(spec.vtrace.actors)]
        self.groups = UnrollGroups(layout, 1, shared=False)
        self.weights = WeightsBuffer(network, shared=False)
        self.next_actor = 0

    def receive(self, timeout: float = 0.0) -> list[Delivery]:
        actor = self.actors[self.next_actor]
        episodes = actor.unroll(self.weights, self.groups.group(0))
        self.next_actor = (self.next_actor + 1) % len(self.actors)
        return [Delivery(0, actor.index, episodes)]

    def arrays(self, group: int) -> UnrollArrays:
        return self.groups.group(group)

    def release(self, group: int) -> None:
        """Nothing to hand back: the one group is rewritten by the next round."""

    def state_dict(self) -> dict:
        return {"next_actor": self.next_actor,
                "actors": {str(actor.index): actor.state_dict() for actor in self.actors}}

    def load_state_dict(self, state: dict) -> list[str]:
        """Continue from state_dict(); returns a sentence per env that had to start a fresh episode."""
        # The actor count may have changed since the pause: actors without saved state start afresh.
        saved = state["actors"]
        restarts = []
        for actor in self.actors:
            if str(actor.index) in saved:
                restarts += actor.load_state_dict(saved[str(actor.index)])
        self.next_actor = int(state["next_actor"]) % len(self.actors)
        return restarts

    def close(self) -> None:
        for actor in self.actors:
            actor.close()


# ---- parallel mode: actors in their own processes --------------------------------------------------


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
    learner_pid: int


class ActorProcesses:
    """Actors in spawned processes writing rounds into shared slots; the learner reads and frees them."""

    def __init__(self, spec: JobSpec, layout: UnrollLayout, network: nn.Module, generation: int):
        # spawn, never fork: the learner holds torch's thread pools, which do not survive a fork.
        self.context = torch.multiprocessing.get_context("spawn")
        count = spec.vtrace.actors
        self.weights = WeightsBuffer(network, lock=self.context.Lock(), shared=True)
        self.groups = UnrollGroups(layout, count * GROUPS_PER_ACTOR, shared=True)
        self.free_groups = self.context.Queue()
        self.full_groups = self.context.Queue()
        self.stop = self.context.Event()
        for group in range(self.groups.groups):
            self.free_groups.put(group)
        self.processes = []
        self.closed = False
        for index in range(count):
            context = ActorContext(spec, index, actor_seed(spec.job.seed, index, generation), self.groups,
                                   self.weights, self.free_groups, self.full_groups, self.stop, os.getpid())
            # daemon: multiprocessing's exit handler terminates them if close() is never reached.
            process = self.context.Process(target=run_actor_process, args=(context,),
                                           name=PROCESS_NAME.format(index=index), daemon=True)
            self.processes.append(process)

    def start(self) -> None:
        # Children start with SIGINT and SIGTERM blocked (the mask survives fork and exec), so a Ctrl-C
        # that reaches the whole process group while they import cannot kill them before they ignore it.
        # Blocked, not ignored, here: a pause requested meanwhile is delivered to the learner afterwards.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            for process in self.processes:
                process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        # Whatever way the learner leaves (an exception past its own close, say), the actors must be
        # stopped first: multiprocessing's exit handler would only SIGTERM them, which they ignore, and
        # then wait for them for ever. Registered after multiprocessing's, so it runs before it.
        atexit.register(self.close)
        log.info("started %d V-trace actor processes (pids %s)", len(self.processes),
                 " ".join(map(str, self.pids)))

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

    def close(self) -> None:
        """Ask the actors to stop, wait for them, and kill any that do not go (none may outlive this)."""
        atexit.unregister(self.close)
        if self.closed:
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
        for channel in (self.free_groups, self.full_groups):
            channel.close()
            channel.cancel_join_thread()

    def _drain(self) -> None:
        with contextlib.suppress(queue.Empty, OSError, ValueError):
            while True:
                self.full_groups.get_nowait()


def run_actor_process(context: ActorContext) -> None:
    """An actor process: rounds until the learner says stop or is gone, whichever comes first."""
    # The learner decides when a pause happens: a terminal's Ctrl-C (sent to the whole foreground
    # group) or a SIGTERM must not kill actors under it, which it would take for a crash.
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)  # also drops one that arrived while blocked
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    watch_parent(context.index)
    record_where_the_worker_does()
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
    while not context.stop.is_set() and learner_alive(context.learner_pid):
        try:
            return context.free_groups.get(timeout=POLL_S)
        except queue.Empty:
            continue
    return None


def learner_alive(learner_pid: int) -> bool:
    # A dead parent's children are re-parented (to init or a subreaper), so the parent pid changes.
    return os.getppid() == learner_pid


def watch_parent(index: int) -> None:
    """Name the process for ps/psutil and, on Linux, have the kernel kill it when the learner dies."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_NAME, PROCESS_NAME.format(index=index).encode()[:15], 0, 0, 0)
        # The learner thread that spawned us is the worker's main thread, so this fires when the
        # process dies, even by SIGKILL, with no chance for it to clean up.
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
