"""The daemon: one per RLSUP_HOME; reconciles what clients want with the workers that run."""
from __future__ import annotations

import collections
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from rlsup import hardware as hardware_module, spec as specs
from rlsup.jobs import state as jobstate
from rlsup.run import files as runfiles
from rlsup.daemon import deciding, hooks, moves, scheduler
from rlsup.daemon.edit_queue import EditHandling, EditQueue
from rlsup.daemon.runner import JobRunner, RunnerUnavailable, Signal, WorkerHandle
from rlsup.daemon.runners import Runners
from rlsup.daemon.supervisor import LocalRunner
from rlsup.daemon.settings_file import load_settings
from rlsup.daemon.store_watch import StoreWatch
from rlsup.daemon.watcher import SpecWatcher
from rlsup.daemon.worker_reports import WorkerReports, memory_need
from rlsup.jobs.state import ACTIVE, Desired, Exit, State
from rlsup.run.status import read_worker_status
from rlsup.jobs.store import Job, JobChanges, Process, SentSignal, SignalKind, Store, StoreBusy
from rlsup.jobs.record import EventKind, row_section, section_columns

log = logging.getLogger("rlsup.daemon")

FULL_RECONCILE_S = 1.0    # even without a database change: backoffs expire, grace periods run out
STATUS_POLL_S = 0.25      # reading status.json of active jobs: starting -> running, step cache
LOG_TAIL_LINES = 12       # lines of worker.log quoted in a failure reason


class Daemon(EditHandling):
    """The reconcile loop. Only this class writes job states and, through its runner, starts and signals workers.

    machine (the hardware placement sees) and runner (where workers run) are built by the caller:
    tests and demos pass fakes; by default the real machine and local processes.
    """

    def __init__(self, home: Path, settings: scheduler.Settings, *, machine: hardware_module.Machine | None = None,
                 runner: JobRunner | None = None):
        self.home = Path(home)
        self.settings = settings
        self.store = Store(self.home)
        self.store_watch = StoreWatch(self.store.path, self.request_stop)
        self.runner: JobRunner = runner or Runners(LocalRunner(warm_start=settings.warm_start),
                                                   lambda: self.settings.clusters)
        self.machine = machine or hardware_module.Hardware()
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.watcher = SpecWatcher(settings.debounce_s, self.wake)
        self.edit_queue = EditQueue()           # saves judged, and the jobs they still have to reach
        self.hooks = hooks.Hooks(self.store)    # before recover(): the exits it settles run their hooks
        self.mover = moves.RunMover(self.wake)  # runs made locally moving under a cluster's run_root
        self.pending_reload: set[int] = set()   # live edits that reached a worker still starting
        self.unsettled: list[tuple[WorkerHandle, Exit]] = []  # exits reaped while the store was busy
        self.known_jobs: set[int] = set()       # jobs whose file has been checked since start-up
        self.resumed: set[int] = set()          # paused jobs resumed, not yet started: they take back a slot
        self.reports = WorkerReports(self.store, self.machine)  # what status.json tells besides the step
        self.last_version: int | None = None
        self.dirty = False   # our own writes that need a reconcile (data_version ignores them)
        self.reload_settings = False
        self.last_reconcile = self.last_status = self.last_sample = 0.0

    # ------------------------------------------------------------------ loop

    def run(self) -> None:
        log.info("daemon pid %s started for %s", os.getpid(), self.home)
        self.store.add_event(None, EventKind.DAEMON, f"daemon started (pid {os.getpid()})")
        self.watcher.start()
        self.recover()   # also checks every job's file once: edits made while no daemon watched
        try:
            while not self.stopping.is_set():
                try:
                    self.tick()
                except StoreBusy as error:  # another process holds the write lock: what was not recorded waits
                    log.warning("%s; the daemon tries again", error.why)
                except sqlite3.DatabaseError as error:  # named once: by the watch when it is the file's fault
                    if not (self.store_watch.check() or self.store_watch.unreadable(error)):
                        self.store_watch.trouble(error)
                self.wake.wait(self.settings.tick_s)
                self.wake.clear()
        finally:
            self.watcher.stop()
            self.hooks.stop()
            if not self.store_watch.lost:
                self.store.add_event(None, EventKind.DAEMON, "daemon stopped; workers keep running")
            log.info("daemon stopped; %d worker(s) left running", len(self.runner.handles()))
            self.store.close()
            self.machine.close()

    def tick(self) -> None:
        if self.store_watch.check():
            return
        if self.reload_settings:
            self.apply_settings()
        now = time.monotonic()
        version = self.store.data_version()
        ended, self.unsettled = self.unsettled + self.runner.reap(), []
        for worker, outcome in ended:
            if not self.contain(worker.job_id, lambda: self.finish(worker, outcome)):
                self.unsettled.append((worker, outcome))  # reaped, so nothing else would settle it
        for moved in self.mover.finished():
            self.dirty = True
            self.contain(moved.job_id, lambda: moves.record(self.mover, self.store, moved))
        for job_id, kind, message in self.mover.take_discards():
            log.info("job %s: %s", job_id, message)
            self.contain(job_id, lambda: self.store.forget_moved_from(job_id, kind, message))
        for path in self.watcher.due():
            self.queue_file(path)
        self.apply_queued_edits()
        if ended or self.dirty or version != self.last_version or now - self.last_reconcile >= FULL_RECONCILE_S:
            self.last_version, self.last_reconcile, self.dirty = version, now, False
            self.reconcile()
        if now - self.last_status >= STATUS_POLL_S:
            self.last_status = now
            self.poll_status()
        if self.settings.hardware_sample_s and now - self.last_sample >= self.settings.hardware_sample_s:
            self.last_sample = now
            self.sample_hardware()
        self.hooks.follow(self.settings)

    def request_stop(self, *_signal_arguments) -> None:
        self.stopping.set()
        self.wake.set()

    def request_reload(self, *_signal_arguments) -> None:
        self.reload_settings = True
        self.wake.set()

    def apply_settings(self) -> None:
        """SIGHUP to the daemon: re-read daemon.toml; a bad file keeps the settings in force."""
        self.reload_settings = False
        try:
            settings = load_settings(self.home)
        except scheduler.SettingsError as error:
            log.error("daemon.toml not applied: %s", error)
            self.store.add_event(None, EventKind.DAEMON, f"daemon.toml not applied: {error}")
            return
        self.settings, self.watcher.debounce_s, self.dirty = settings, settings.debounce_s, True
        self.store.add_event(None, EventKind.DAEMON, "daemon.toml reloaded")

    # ------------------------------------------------------------------ start-up: adopt or settle

    def recover(self) -> None:
        """Adopt the workers a previous daemon left running; settle those that ended meanwhile."""
        for job in self.store.jobs(ACTIVE):
            self.contain(job.id, lambda: self.recover_job(job))
        self.watch_files()

    def recover_job(self, job: Job) -> None:
        if job.pid is None:
            # The previous daemon died between recording the start and recording the pid: the worker
            # it spawned may be running all the same, holding the run's lock.
            if not self.adopt_lock_holder(job, "spawned just before the previous daemon stopped"):
                self.store.transition(job.id, State.QUEUED, "the daemon stopped before the worker started")
            return
        process = job.process
        recorded = WorkerHandle(job.id, job.pid, process.start_time, process.boot_id or "", Path(job.run_dir),
                                ref=process.ref or "", node=process.node or "")
        if self.runner.adopt(recorded):
            self.store.add_event(job.id, EventKind.ADOPTED, f"adopted running worker pid {job.pid}")
            return
        # Gone (or a pid from before a reboot): its exit.json, if any, says how it ended.
        self.finish(recorded, self.runner.exit_of_lost(recorded))

    def adopt_lock_holder(self, job: Job, why: str) -> WorkerHandle | None:
        """Adopt the live worker holding the job's run lock, if there is one."""
        worker = self.runner.adopt_run_holder(job.id, Path(job.run_dir))
        if worker is None:
            return None
        self.record_worker(worker, job.gpu_indices)
        self.store.add_event(job.id, EventKind.ADOPTED, f"adopted worker pid {worker.pid} holding the run ({why})")
        return worker

    def contain(self, job_id: int, action: Callable[[], object]) -> bool:
        """Do one job's part of the loop; whatever in that job breaks it fails the job, never the daemon. A busy
        store is no fault of the job (failing it killed its worker): nothing was recorded, and False says so."""
        try:
            action()
        except StoreBusy as error:
            log.warning("job %s: %s; tried again", job_id, error.why)
            return False
        except Exception as error:
            # The store's fault, not the job's: the daemon stops. A store cut to 0 bytes under the loop raised
            # "no such table" or found no row, which failed the job and killed its worker (seen once in CI).
            if self.store_watch.check() or (isinstance(error, sqlite3.DatabaseError)
                                            and self.store_watch.unreadable(error)):
                return False
            log.exception("job %s: the daemon could not handle it", job_id)
            self.fail_broken(job_id, f"the daemon could not handle this job: {type(error).__name__}: {error}")
        return True

    def fail_broken(self, job_id: int, reason: str) -> None:
        try:
            self.runner.signal(job_id, Signal.KILL)  # a worker nobody tracks would be a second writer later
            self.runner.forget(job_id)
            job = self.store.job(job_id)
            if job is not None and jobstate.allowed(job.state, State.FAILED):
                self.store.transition(job_id, State.FAILED, reason)
            else:
                self.store.add_event(job_id, EventKind.DAEMON, reason)
        except Exception:
            log.exception("job %s: could not even record the failure", job_id)

    def watch_files(self, jobs: list[Job] | None = None) -> None:
        """Watch every job's file; check new jobs' files once, for edits made before the watch began."""
        jobs = self.store.jobs() if jobs is None else jobs
        self.watcher.watch(job.spec_path for job in jobs if job.state is not State.KILLED)
        new: dict[str, list[Job]] = collections.defaultdict(list)
        for job in jobs:
            if job.id not in self.known_jobs and job.state is not State.KILLED:
                new[job.spec_path].append(job)
            self.known_jobs.add(job.id)
        for path, following in new.items():
            self.queue_file(path, following)

    # ------------------------------------------------------------------ reconcile

    def reconcile(self) -> None:
        jobs = self.store.jobs()
        for job in jobs:
            if job.state in ACTIVE:
                self.contain(job.id, lambda: self.drive_active(job))
            else:
                self.contain(job.id, lambda: self.settle_intent(job))
        deciding.decide(self.store)  # before schedule(): a member promoted now starts in this round
        self.schedule()
        self.watch_files(jobs)

    def settle_intent(self, job: Job) -> None:
        """Apply a client's intent to a job without a worker: pause or kill a queued job, resume one."""
        target = jobstate.intent_target(job.state, job.desired, new_intent=job.new_intent)
        if target is not None:
            changes: JobChanges = {"applied_seq": job.desired_seq}
            if job.state in (State.FAILED, State.KILLED) and target is State.QUEUED:
                changes.update(restarts=0, not_before=0.0)
            if job.state is State.PAUSED and target is State.QUEUED:
                self.resumed.add(job.id)
            self.store.transition(job.id, target, f"{job.desired} requested", **changes)
        elif job.new_intent:
            self.store.update(job.id, applied_seq=job.desired_seq)

    def drive_active(self, job: Job) -> None:
        """Carry a client's intent to a live worker; escalate a pause that overran its grace."""
        if job.new_intent:
            self.store.update(job.id, applied_seq=job.desired_seq)
        if self.runner.handle(job.id) is None:
            return  # reaped this tick or being settled; its exit already moved it
        sent = job.signal.kind if job.signal else None
        if job.desired is Desired.KILLED:
            if sent is not SignalKind.KILL and self.runner.signal(job.id, Signal.KILL):
                self.store.update(job.id, signal=SentSignal(SignalKind.KILL, time.time()))
                self.store.add_event(job.id, EventKind.SIGNAL, "SIGKILL to the process group (kill requested)")
        elif job.desired is Desired.PAUSED and job.state is not State.PAUSING:
            self.begin_pause(job, "pause requested")
        elif job.state is State.PAUSING and sent is SignalKind.PAUSE:
            grace, since = self.run_settings(job).stop_grace_s, job.signal.time
            if since and time.time() - since > grace and self.runner.signal(job.id, Signal.KILL):
                self.store.update(job.id, signal=SentSignal(SignalKind.PAUSE_KILL, since))
                self.store.add_event(job.id, EventKind.SIGNAL, f"no pause checkpoint after {grace:g} s: SIGKILL")

    def begin_pause(self, job: Job, reason: str) -> None:
        """SIGINT: the worker finishes its step, writes a pause checkpoint and exits 75."""
        if self.runner.signal(job.id, Signal.PAUSE):
            self.store.transition(job.id, State.PAUSING, reason, signal=SentSignal(SignalKind.PAUSE, time.time()))

    def run_settings(self, job: Job) -> specs.JobSection:
        """The run's [job] as accepted (its job.toml): the one source of its budget, restarts and grace."""
        try:
            return runfiles.read_run_spec(Path(job.run_dir)).job
        except specs.SpecError:  # unreadable: the row's copy of it, defaults for the rest
            return row_section(job)

    def schedule(self) -> None:
        jobs = self.store.jobs([State.QUEUED, *ACTIVE])
        active = [job for job in jobs if job.state in ACTIVE and not job.cluster]
        queued = [job for job in jobs if job.state is State.QUEUED and job.desired is Desired.RUNNING]
        if not queued:
            return
        # A cluster places its own jobs on its nodes and GPUs: this machine's slots are for local ones.
        on_clusters = scheduler.place_on_clusters(
            [(candidate(job), job.cluster) for job in queued if job.cluster],
            active=collections.Counter(job.cluster for job in jobs if job.state in ACTIVE and job.cluster),
            settings=self.settings, now=time.time())
        totals = self.machine.gpu_memory_totals()
        plan = scheduler.place(
            [candidate(job, totals) for job in queued if not job.cluster],
            # What running jobs hold, not what they want: an edit of gpus applies at the next start.
            active_gpu_jobs=[scheduler.GpuHolding(job.gpu_indices, memory_need(job, totals)) for job in active
                             if job.gpus],
            active_cpu_jobs=sum(1 for job in active if not job.gpus), gpu_indices=self.machine.gpu_indices(),
            gpu_memory_totals=totals, settings=self.settings, now=time.time())
        by_id = {job.id: job for job in queued}
        for placement in plan.start + on_clusters.start:
            self.contain(placement.job_id, lambda: self.start(by_id[placement.job_id], placement.gpus))
        self.reclaim_slots(queued, active, plan.waiting)
        for job_id, reason in {**plan.waiting, **on_clusters.waiting}.items():
            if by_id[job_id].reason != reason and not reason.startswith("restart backoff"):
                self.store.update(job_id, reason=reason)
                # Once per new reason, so the events say why the job waits after the table row scrolls.
                self.store.add_event(job_id, EventKind.WAITING, reason)

    def reclaim_slots(self, queued: list[Job], active: list[Job], waiting: dict[int, str]) -> None:
        """Resumed jobs keep their place in the queue: a later job holding a CPU slot pauses and queues again.

        Only a resumed job does this, not any higher-priority submit: priority orders the queue, and a new
        job never interrupts a running one. The later job pauses with a checkpoint and resumes when a slot
        frees, as an edit's restart does. GPU jobs are not reclaimed (yet)."""
        self.resumed &= {job.id for job in queued}
        resumed = [candidate(job) for job in queued if job.id in self.resumed and not job.cluster
                   and not job.gpus_wanted and waiting.get(job.id, "").startswith(scheduler.CPU_WAIT)]
        if not resumed:
            return
        cpu_jobs = [job for job in active if not job.gpus]
        running = [candidate(job) for job in cpu_jobs if job.state is State.RUNNING and job.desired is Desired.RUNNING]
        staying = sum(1 for job in cpu_jobs if job.state not in (State.PAUSING, State.STOPPING))
        by_id = {job.id: job for job in cpu_jobs}
        free = self.settings.cpu_jobs - staying
        for victim, resumed_id in scheduler.slots_to_reclaim(resumed, running, free).items():
            self.contain(victim, lambda: self.begin_pause(
                by_id[victim], f"yields its CPU slot to job {resumed_id}, resumed ahead of it in the queue"))

    def start(self, job: Job, gpus: tuple[int, ...]) -> None:
        # The state is written before the spawn: a daemon dying in between leaves a job in
        # `starting` without a pid, which recover() adopts through the run's lock or re-queues.
        if job.cluster and not moves.ready_to_start(self.mover, self.store, job, self.settings.clusters):
            return  # its run moves under the cluster's run_root first, in a thread holding its lock
        if self.runner.run_held(Path(job.run_dir)):
            # A worker already trains this run (left by a daemon that died while starting it): adopt
            # it, since a second one would write the same files. Not yet identifiable: next round.
            worker = self.adopt_lock_holder(job, "found before spawning another")
            if worker is not None:
                self.store.transition(job.id, State.STARTING, "a worker already trains this run",
                                      process=process_of(worker, gpus), exit_code=None)
            return
        if not self.runner.ready_to_start(Path(job.run_dir)):
            return  # the fork server is importing torch: the job starts from it in a round or two
        self.resumed.discard(job.id)
        where = f" on GPU {','.join(map(str, gpus))}" if gpus else f" on cluster {job.cluster}" if job.cluster else ""
        self.store.transition(job.id, State.STARTING, "placed" + where, process=Process(gpus), started=time.time(),
                              exit_code=None)
        try:
            worker = self.runner.start(job.id, Path(job.run_dir), gpus)
        except RunnerUnavailable as error:
            self.store.transition(job.id, State.QUEUED, f"{error}; trying again", not_before=time.time() + error.retry_s)
            return
        except OSError as error:
            self.store.transition(job.id, State.FAILED, f"cannot start the worker: {error}")
            return
        self.record_worker(worker, gpus)

    def record_worker(self, worker: WorkerHandle, gpus: tuple[int, ...]) -> None:
        """What recognises the worker after a daemon restart."""
        self.store.update(worker.job_id, process=process_of(worker, gpus))

    # ------------------------------------------------------------------ workers' progress and exits

    def poll_status(self) -> None:
        """Follow status.json of live workers: starting -> running, and the step cache."""
        for job in self.store.jobs(ACTIVE):
            self.contain(job.id, lambda: self.poll_job(job))

    def poll_job(self, job: Job) -> None:
        worker = self.runner.handle(job.id)
        status = read_worker_status(job.run_dir)
        if worker is None or status is None or status.pid != worker.pid:
            return
        if (worker.pid, worker.node or None) != (job.pid, job.process.node):  # a cluster worker's, learnt since
            self.record_worker(worker, job.gpu_indices)
        self.reports.record(job, worker.pid, status)
        step = status.step or 0
        if job.state is State.STARTING:
            self.store.transition(job.id, State.RUNNING, f"worker pid {worker.pid} reports", step=step)
            if job.id in self.pending_reload:
                self.pending_reload.discard(job.id)
                self.reload(job.id)
        elif step != job.step:
            # The step is shown, never acted on: anyone who can write the run can write status.json in the
            # worker's name. The worker ends itself at its budget (job.toml's), and its exit says so.
            self.store.update(job.id, step=step)

    def reload(self, job_id: int) -> None:
        if self.runner.signal(job_id, Signal.RELOAD):
            self.store.add_event(job_id, EventKind.SIGNAL,
                                 "reload: the worker applies the live fields (SIGHUP, and its job.toml rewritten)")

    def finish(self, worker: WorkerHandle, ended: Exit) -> None:
        """Move a job whose worker ended to its next state."""
        job = self.store.job(worker.job_id)
        self.pending_reload.discard(worker.job_id)
        if job is None or job.state not in ACTIVE:
            return
        # Another worker holds the run (this one found it locked and left): follow that one instead.
        if self.adopt_lock_holder(job, f"worker pid {worker.pid} ended beside it"):
            return
        run = self.run_settings(job)
        outcome = jobstate.exit_outcome(
            ended, desired=job.desired, total_steps=run.total_steps, restarts=job.restarts,
            max_restarts=run.max_restarts,
            stopped_by_daemon=job.signal is not None and job.signal.kind in (SignalKind.PAUSE, SignalKind.PAUSE_KILL))
        # The row's copy of the budget follows job.toml, which a live edit may have changed meanwhile.
        changes: JobChanges = dict(exit_code=ended.code if ended.signal is None else -ended.signal,
                                   finished=time.time(), **section_columns(run, ("total_steps", "max_restarts")))
        if ended.step is not None:
            changes["step"] = ended.step
        reason = outcome.reason
        if outcome.desired is not None:
            changes["desired"] = outcome.desired
        if ended.held and job.gpu_indices:  # out of GPU memory beside other jobs: from now on it runs alone
            totals = self.machine.gpu_memory_totals()
            changes["gpu_memory_bytes"] = max((totals.get(index) or 0 for index in job.gpu_indices), default=0) or None
        if outcome.restart:
            delay = jobstate.restart_backoff(job.restarts, self.settings.restart_backoff_s)
            changes.update(restarts=job.restarts + 1, not_before=time.time() + delay)
        if outcome.state is State.FAILED:
            tail = self.runner.log_tail(Path(job.run_dir), LOG_TAIL_LINES)
            reason += ("\nlast lines of worker.log:\n" + "\n".join(tail)) if tail else ""
        log.info("job %s: worker pid %s ended (%s) -> %s", job.id, worker.pid, ended.describe(), outcome.state)
        with self.store.transaction():  # a standing is recorded with the pause it was measured at, or not at all
            deciding.record_standing(self.store, job, ended.code)
            self.store.transition(job.id, outcome.state, reason, **changes)

    def sample_hardware(self) -> None:
        try:
            self.store.add_hardware_sample(self.machine.sample().to_dict())
        except sqlite3.DatabaseError as error:  # the store's file damaged: the watch stops the daemon
            if not self.store_watch.unreadable(error):
                log.exception("hardware sample failed")
        except Exception:  # a sensor hiccup must never stop the daemon
            log.exception("hardware sample failed")


def process_of(worker: WorkerHandle, gpus: tuple[int, ...]) -> Process:
    return Process(gpus, worker.pid, worker.start_time, worker.boot_id, worker.ref or None, worker.node or None)


def candidate(job: Job, gpu_memory_totals: dict[int, int | None] | None = None) -> scheduler.Candidate:
    """The job as placement sees it; its memory judged against the GPUs' totals where they are given."""
    return scheduler.Candidate(job.id, job.priority, job.gpus_wanted, job.not_before,
                               memory_need(job, gpu_memory_totals or {}))
