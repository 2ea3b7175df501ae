"""Learning beside acting: where DQN's learner rounds run, a thread of its own or (learner_process) a process."""
from __future__ import annotations

import time
from contextlib import nullcontext
from concurrent.futures import Future, ThreadPoolExecutor

import torch

from rlsup.algos.learner_process import LearnerProcess
from rlsup.run.float_mode import inherit_flush_denormals


class LearnerThread:
    """One thread that runs a learner round while the caller steps the envs; joined before its result is used.

    Only one round runs at a time and the caller always waits for it before the next, so the order of
    updates, env steps and syncs is the schedule's, never the machine's. On CUDA the round runs on a
    stream of its own, which the caller's stream waits for when the round is collected. The two threads
    share Python's lock, released only inside torch's kernels: long kernels (a Nature CNN) overlap, while
    a tiny network's dozens of short ones make both sides wait (bench/dqn_overlap.py measures which).
    """

    def __init__(self, learner, device: torch.device) -> None:
        self.learner = learner
        self.device = device
        self.executor: ThreadPoolExecutor | None = None
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.round: Future | None = None
        # Wall seconds the rounds ran, and that the caller waited in collect(): bench/dqn_overlap.py reads them.
        self.round_seconds = 0.0
        self.waited_seconds = 0.0

    def start(self, batches: list, step: int) -> None:
        """A round: one gradient step per batch, all at the learning rate of env step `step`."""
        if self.round is not None:
            raise RuntimeError("a learner round is still running: collect it before starting another")
        if self.executor is None:
            # A new thread starts with its creator's float mode; set from the run's, not left to where it was made.
            self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlsup-learner",
                                               initializer=inherit_flush_denormals)
        self.round = self.executor.submit(self._run, batches, step)

    def _run(self, batches: list, step: int) -> list[dict]:
        began = time.perf_counter()
        try:
            with torch.cuda.stream(self.stream) if self.stream is not None else nullcontext():
                return [self.learner.update(batch, step) for batch in batches]
        finally:
            self.round_seconds += time.perf_counter() - began

    def collect(self) -> list[dict] | None:
        """Wait for the running round (None if none) and return its losses; its exception is raised here."""
        if self.round is None:
            return None
        round_, self.round = self.round, None
        began = time.perf_counter()
        try:
            result = round_.result()
        finally:
            self.waited_seconds += time.perf_counter() - began
        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_stream(self.stream)
        return result

    def close(self) -> None:
        """Wait for a running round, whatever it raised, and end the thread."""
        if self.round is not None:
            self.round.exception()
            self.round = None
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None


def learner_rounds(learner, device: torch.device) -> LearnerThread | LearnerProcess:
    """Where an overlapped learner's rounds run: a process of its own for a CPU learner, whose small
    kernels would hold Python's lock against the envs on a thread, and a thread for a GPU's, whose kernels
    run without it (bench/dqn_overlap.py measures both)."""
    if device.type == "cpu":
        return LearnerProcess(learner)
    return LearnerThread(learner, device)
