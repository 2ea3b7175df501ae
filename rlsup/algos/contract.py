"""The trainer contract: what the worker asks of every algorithm, declared once and free of torch."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import torch

    from rlsup.algos.episodes import EpisodeReturns
    from rlsup.spec import JobSpec

# Observations in a batch → one action each: what evaluation, `rlsup enjoy` and later exports play.
Policy = Callable[["np.ndarray"], "np.ndarray"]


@runtime_checkable
class Trainer(Protocol):
    """One algorithm's training state and loop, as the worker drives it between checkpoints.

    The checkpoint contract: state_dict() holds everything a resumed run needs to be the same run
    (networks, optimizers, counters, envs mid-episode, every random stream it owns), so that
    load_state_dict() of it on a freshly built trainer continues bit for bit; with include_replay
    it also holds a "replay" entry, which a resumed run without it refills.
    """

    step: int  # env steps trained so far: budgets, schedules and checkpoints are counted in it
    # Set by load_state_dict: one sentence per env whose saved episode could not be replayed exactly
    # (a non-deterministic env) and that started a fresh one instead; the worker reports them.
    env_restarts: tuple[str, ...]

    @property
    def episodes(self) -> int:
        """Episodes finished so far."""
        ...

    @property
    def device(self) -> torch.device:
        """Where the learner computes (status.json reports it)."""
        ...

    def iterate(self) -> list[dict]:
        """Advance by at least one step; returns the metric records (kind "episode", ...) it produced."""
        ...

    def train_metrics(self) -> dict:
        """Averages since the previous call, for a `train` record; the loss under its Algorithm.loss_metric."""
        ...

    def mean_return(self) -> float | None:
        """The mean unclipped return of recent episodes, None before the first."""
        ...

    def greedy_policy(self) -> Policy:
        """The current network acting greedily, for evaluation."""
        ...

    def fingerprint(self) -> str:
        """sha256 of the acting network's parameters: equal iff two runs are bit-identical."""
        ...

    def state_dict(self, *, include_replay: bool = True) -> dict:
        ...

    def load_state_dict(self, state: dict) -> None:
        ...

    def close(self) -> None:
        """Let go of processes, envs and shared memory."""
        ...

    # Optional, not declared here so that a trainer without it still is one: gpu_memory_bytes() -> int | None,
    # the GPU memory it holds (LearnerTrainer's reads torch's allocator), which packs jobs onto shared GPUs; and
    # holds_replay (True if absent): False for a trainer with nothing replayed between two iterate() calls, whose
    # checkpoints without a replay ([checkpoint] replay = false) still resume bit for bit.


class TrainerFactory(Protocol):
    """Builds a trainer at step 0 for a job on a device; a checkpoint is loaded into it afterwards."""

    def __call__(self, spec: JobSpec, device: torch.device) -> Trainer: ...


class PolicyFactory(Protocol):
    """Builds the greedy CPU policy of a checkpoint from the job and the trainer's saved state.

    What `rlsup enjoy` plays (and exports will write): the algorithm knows where its weights are.
    """

    def __call__(self, spec: JobSpec, trainer_state: dict[str, Any]) -> Policy: ...


class Learner(Protocol):
    """What LearnerTrainer needs of its learner: where it computes, how it acts, and its fingerprint."""

    device: torch.device

    def greedy_actions(self, observations: np.ndarray) -> np.ndarray: ...

    def fingerprint(self) -> str: ...


class LearnerTrainer:
    """The part of the Trainer contract that a trainer around one learner shares with every other.

    A subclass sets `learner` and `returns` (an EpisodeReturns) and writes the rest: its loop,
    its metrics and its checkpoint state.
    """

    learner: Learner
    returns: EpisodeReturns
    env_restarts: tuple[str, ...] = ()

    @property
    def episodes(self) -> int:
        return self.returns.count

    @property
    def device(self) -> torch.device:
        return self.learner.device

    def mean_return(self) -> float | None:
        return self.returns.mean()

    def greedy_policy(self) -> Policy:
        return self.learner.greedy_actions

    def fingerprint(self) -> str:
        return self.learner.fingerprint()

    def gpu_memory_bytes(self) -> int | None:
        """The most GPU memory torch's allocator reserved for this process; None off CUDA. Optional in the
        contract: a trainer whose memory is not torch's (or a test's) may report its own count."""
        if self.device.type != "cuda":
            return None
        import torch

        return int(torch.cuda.max_memory_reserved(self.device))
