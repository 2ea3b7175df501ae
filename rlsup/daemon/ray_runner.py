"""The Ray JobRunner: each worker a Ray job on a cluster, submitted only when the daemon places it.

Ray Jobs keeps no queue worth the name (a job pending 15 minutes fails), forgets its jobs when its
head restarts and loses a stopped job's exit code, so rlsup keeps the queue in its store, reads
every outcome from the run directory's exit.json, and treats a job Ray no longer knows as lost.
ray is imported here only, and only when a cluster job is first submitted or followed.
"""
from __future__ import annotations

import logging
import math
import secrets
import shlex
import signal
import time
import urllib.parse
from pathlib import Path

from rlsup import locks, paths
from rlsup.run import files as runfiles
from rlsup.run.exit import clear_exit
from rlsup.run.status import read_worker_status
from rlsup.daemon.clusters import Cluster
from rlsup.daemon.runner import RunnerUnavailable, Signal, WorkerHandle
from rlsup.daemon.supervisor import exit_from_record
from rlsup.jobs.state import Exit

log = logging.getLogger("rlsup.daemon")

POLL_S = 0.5  # how often Ray is asked how its jobs are: one list_jobs request to the head for all of them
# A head that stops answering is logged at once, then again after each of these (the last one repeating),
# and once when it answers again: not at every poll.
UNREACHABLE_LOG_AFTER_S = (60.0, 300.0, 1800.0)
LIVE_STATUSES = ("PENDING", "RUNNING")


class RayUnreachable(RunnerUnavailable):
    """The cluster's head does not answer (or ray is not installed here)."""


class UnreachableLog:
    """Warnings about a head that does not answer: the first, then at growing intervals, then its return."""

    def __init__(self, cluster: str, clock=time.monotonic):
        self.cluster, self.clock = cluster, clock
        self.since: float | None = None  # when the head stopped answering; None while it answers
        self.next_warning = 0.0
        self.warnings = 0

    def failed(self, error: Exception) -> None:
        now = self.clock()
        if self.since is None:
            self.since, self.warnings = now, 0
        if now < self.next_warning and self.warnings:
            return
        later = UNREACHABLE_LOG_AFTER_S[min(self.warnings, len(UNREACHABLE_LOG_AFTER_S) - 1)]
        self.warnings += 1
        self.next_warning = now + later
        lasting = f" (unanswered for {now - self.since:.0f} s)" if self.warnings > 1 else ""
        log.warning("%s%s; its jobs are followed until it answers (next warning in %.0f s)", error, lasting, later)

    def answered(self) -> None:
        if self.since is not None:
            log.warning("cluster %s: the Ray head answers again after %.0f s", self.cluster,
                        self.clock() - self.since)
            self.since = None


class RayRunner:
    """Workers as Ray jobs on one cluster, followed by job id; pause and kill through Ray's stop."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.boot_id = f"ray:{cluster.name}"  # a handle of another cluster, or a local pid, is never ours
        self.workers: dict[int, WorkerHandle] = {}
        self.last_poll = 0.0
        self._client = None
        self.unreachable = UnreachableLog(cluster.name)
        # The head's jobs as last listed (JobDetails by submission id), or why they could not be.
        self._listing: dict[str, object] | RayUnreachable = {}
        self._listed_at = -math.inf

    # -- the head ------------------------------------------------------------------------------

    @property
    def client(self):
        """The head's JobSubmissionClient, made at first use (it asks the head its version)."""
        if self._client is None:
            try:
                from ray.job_submission import JobSubmissionClient
            except ImportError as error:
                raise RayUnreachable(f"cluster {self.cluster.name}: ray is not installed here "
                                     f"(pip install 'rlsup[ray]'): {error}") from None
            try:
                self._client = JobSubmissionClient(self.cluster.address)
            except Exception as error:  # ray raises ConnectionError, RuntimeError or its own kinds
                raise RayUnreachable(f"cluster {self.cluster.name}: no Ray head answers at "
                                     f"{self.cluster.address}: {error}") from None
        return self._client

    def _info(self, ref: str):
        """Ray's JobDetails of a submission, or None when the head no longer knows it."""
        return self._jobs().get(ref)

    def _jobs(self, *, fresh: bool = False) -> dict[str, object]:
        """Every job the head knows, by submission id: one request, its answer (or failure) reused within a
        poll unless fresh, so that adopting many jobs at start-up asks the head once."""
        if fresh or time.monotonic() - self._listed_at >= POLL_S:
            self._listed_at = time.monotonic()
            try:
                self._listing = self._list_jobs()
                self.unreachable.answered()
            except RayUnreachable as error:
                self._listing = error
                self.unreachable.failed(error)
        if isinstance(self._listing, RayUnreachable):
            raise RayUnreachable(str(self._listing))
        return self._listing

    def _list_jobs(self) -> dict[str, object]:
        try:
            jobs = self.client.list_jobs()
        except RayUnreachable:
            raise
        except Exception as error:  # ray raises ConnectionError, RuntimeError or its own kinds
            raise RayUnreachable(f"cluster {self.cluster.name}: {error}") from None
        return {details.submission_id: details for details in jobs if details.submission_id}

    # -- the JobRunner protocol ------------------------------------------------------------------

    def ready_to_start(self, run_dir: Path) -> bool:
        return True  # whether the head answers, start() finds out

    def start(self, job_id: int, run_dir: Path, gpus: tuple[int, ...] = ()) -> WorkerHandle:
        """Submit `python -m rlsup.worker RUN_DIR` with the job's GPUs and its stop grace, output to worker.log."""
        run_dir = Path(run_dir)
        check_visible(self.cluster, run_dir)
        job = runfiles.read_run_spec(run_dir).job
        # An earlier worker's outcome and kill request must not be read as this one's (its pid is not known yet).
        clear_exit(run_dir)
        ref = f"rlsup-{job_id}-{secrets.token_hex(4)}"
        started = time.time()
        try:
            self.client.submit_job(
                entrypoint=entrypoint(self.cluster.python, run_dir), submission_id=ref,
                runtime_env={"env_vars": stop_environment(job.stop_grace_s)},
                entrypoint_num_gpus=job.gpus or None,
                metadata={"rlsup_job": str(job_id), "rlsup_run_dir": str(run_dir)})
        except RayUnreachable:
            raise
        except Exception as error:
            raise RayUnreachable(f"cluster {self.cluster.name} refused the job: {error}") from None
        self._listed_at = -math.inf  # a listing from before the submission would read as a job the head forgot
        log.info("job %s: submitted to cluster %s as %s (gpus %s)", job_id, self.cluster.name, ref, job.gpus)
        return self._follow(WorkerHandle(job_id, 0, started, self.boot_id, run_dir, ref=ref))

    def adopt(self, recorded: WorkerHandle) -> bool:
        """Follow a Ray job a previous daemon submitted, while Ray still runs (or queues) it.

        A head that does not answer now may run it all the same: it is followed, and reap() tells.
        """
        if recorded.boot_id != self.boot_id or not recorded.ref:
            return False
        try:
            info = self._info(recorded.ref)
            if info is None or str(info.status) not in LIVE_STATUSES:
                return False
        except RayUnreachable:
            pass  # logged by _jobs; reap tells how it ends once the head answers
        self._follow(recorded)
        log.info("job %s: adopted Ray job %s on cluster %s", recorded.job_id, recorded.ref, self.cluster.name)
        return True

    def adopt_run_holder(self, job_id: int, run_dir: Path) -> WorkerHandle | None:
        """The live Ray job submitted for run_dir, when a daemon died before recording its id."""
        for details in self._jobs(fresh=True).values():
            metadata = details.metadata or {}
            if metadata.get("rlsup_run_dir") == str(run_dir) and str(details.status) in LIVE_STATUSES:
                started = (details.start_time or 0) / 1000 or time.time()
                return self._follow(WorkerHandle(job_id, 0, started, self.boot_id, Path(run_dir),
                                                 ref=details.submission_id))
        return None

    def run_held(self, run_dir: Path) -> bool:
        """A job of ours for the run, or any worker holding its lock (the run directory is shared)."""
        run_dir = Path(run_dir)
        return (any(worker.run_dir == run_dir for worker in self.workers.values())
                or locks.holder(run_dir / paths.WORKER_LOCK).held)

    def handle(self, job_id: int) -> WorkerHandle | None:
        return self.workers.get(job_id)

    def handles(self) -> list[WorkerHandle]:
        return list(self.workers.values())

    def signal(self, job_id: int, kind: Signal) -> bool:
        """PAUSE: Ray's stop (SIGINT, the grace, SIGKILL). KILL: the same after the kill marker, which turns
        the worker's SIGINT into an abort without checkpoint. RELOAD: nothing to send, since the worker
        re-reads job.toml at its next status tick when the daemon has rewritten it."""
        worker = self.workers.get(job_id)
        if worker is None:
            return False
        if Signal(kind) is Signal.RELOAD:
            return True
        if kind is Signal.KILL:
            runfiles.request_kill(worker.run_dir)
        try:
            stopped = self.client.stop_job(worker.ref)
        except Exception as error:
            log.warning("job %s: cannot stop Ray job %s: %s", job_id, worker.ref, error)
            return False
        log.info("job %s: Ray stop of %s for %s (%s)", job_id, worker.ref, kind, "sent" if stopped else "ended")
        return bool(stopped) or kind is Signal.KILL

    def reap(self) -> list[tuple[WorkerHandle, Exit]]:
        """Ray jobs that ended, asked of the head at most every POLL_S; learns each worker's pid and node."""
        now = time.monotonic()
        if now - self.last_poll < POLL_S or not self.workers:
            return []
        self.last_poll = now
        try:
            jobs = self._jobs(fresh=True)
        except RayUnreachable:
            return []  # logged by _jobs; the head may be back next poll
        ended = []
        for job_id, worker in list(self.workers.items()):
            info = jobs.get(worker.ref)
            outcome = self._outcome(worker, info)
            if outcome is None:
                self._learn(worker, info)
            else:
                self.forget(job_id)
                ended.append((worker, outcome))
        return ended

    def exit_of_lost(self, recorded: WorkerHandle) -> Exit:
        """How a Ray job no longer followed ended: Ray's status and exit.json, or lost when Ray forgot it."""
        try:
            info = self._info(recorded.ref) if recorded.ref else None
        except RayUnreachable as error:
            return exit_from_record(recorded) or Exit(reason=f"lost: {error}")
        return self._outcome(recorded, info) or Exit(reason=f"lost: Ray job {recorded.ref} still runs but "
                                                           "could not be followed")

    def forget(self, job_id: int) -> None:
        self.workers.pop(job_id, None)

    def log_tail(self, run_dir: Path, lines: int) -> list[str]:
        return runfiles.tail_lines(Path(run_dir) / paths.LOG_FILE, lines, limit=runfiles.QUOTED_TAIL_BYTES)

    # -- reading Ray's answers -------------------------------------------------------------------

    def _follow(self, worker: WorkerHandle) -> WorkerHandle:
        self.workers[worker.job_id] = worker
        return worker

    def _outcome(self, worker: WorkerHandle, info) -> Exit | None:
        """None while Ray runs the job; else how it ended, exit.json first (Ray loses a stopped job's 75)."""
        if info is None:
            recorded = exit_from_record(worker)
            return recorded or Exit(reason=f"lost: the Ray head of cluster {self.cluster.name} no longer knows "
                                           f"job {worker.ref} (restarted?)")
        status = str(info.status)
        if status in LIVE_STATUSES:
            return None
        recorded = exit_from_record(worker)
        if status == "STOPPED":
            # exit.json, or killed after the grace (or stopped before the worker began).
            return recorded or Exit(signal=signal.SIGKILL)
        code = info.driver_exit_code
        if recorded is not None and (code is None or code == recorded.code):
            return recorded
        if code is None:
            return Exit(reason=f"Ray job {worker.ref} {status.lower()}: {info.message or 'no message'}")
        return Exit(code=code, step=recorded.step if recorded else None)

    def _learn(self, worker: WorkerHandle, info) -> None:
        """The worker's pid from its status.json and its node from Ray.

        Only a status of a live worker written since the submission is this worker's: an earlier worker's
        last one (paused, failed) may be less than a second older.
        """
        if worker.pid:
            return
        status = read_worker_status(worker.run_dir)
        if (status is None or status.pid is None or status.phase is None or not status.phase.training
                or (status.time or 0) < (worker.start_time or 0)):
            return
        address = urllib.parse.urlparse(info.driver_agent_http_address or "").hostname
        node = address or (info.driver_node_id or "")[:12]
        self.workers[worker.job_id] = WorkerHandle(worker.job_id, status.pid, worker.start_time, worker.boot_id,
                                                   worker.run_dir, ref=worker.ref, node=node)


def entrypoint(python: str, run_dir: Path) -> str:
    """The shell line Ray runs: exec, so the worker itself gets Ray's stop signal; output to worker.log."""
    log_file = shlex.quote(str(run_dir / paths.LOG_FILE))
    return f"exec {shlex.quote(python)} -u -m rlsup.worker {shlex.quote(str(run_dir))} >> {log_file} 2>&1"


def stop_environment(stop_grace_s: float) -> dict[str, str]:
    """Ray's stop as rlsup's pause: SIGINT, then the job's grace (whole seconds, as Ray reads it), then SIGKILL."""
    return {"RAY_JOB_STOP_SIGNAL": "SIGINT", "RAY_JOB_STOP_WAIT_TIME_S": str(math.ceil(stop_grace_s)),
            "PYTHONUNBUFFERED": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def check_visible(cluster: Cluster, run_dir: Path) -> None:
    """The cluster's nodes see only run_root: a run directory elsewhere cannot be trained there."""
    if not Path(run_dir).resolve().is_relative_to(Path(cluster.run_root).resolve()):
        raise OSError(f"run directory {run_dir} is not under cluster {cluster.name}'s run_root {cluster.run_root}, "
                      "which its nodes see (the daemon moves a run there before it starts it)")
