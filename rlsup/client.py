"""What clients (CLI, TUI) do: submit jobs, record intents, find jobs, start and stop the daemon."""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rlsup import atomic, locks, paths, spec as specs
from rlsup.spec import experiments
from rlsup.run import foreground
from rlsup.run import import_trust, lineage
from rlsup.run.holds import write_hold
from rlsup.jobs import state as jobstate
from rlsup.run import files as runfiles
from rlsup.jobs import store_file
from rlsup.jobs.state import ACTIVE, Desired, State
from rlsup.jobs.admission import (FileAlreadyBound, JudgedFile, NameTaken, check_experiment_room, check_unbound,
                                  judge_file)
from rlsup.jobs.record import spec_columns
from rlsup.views.decisions import held_refusal
from rlsup.views.jobs import foreground_advice
from rlsup.jobs.store import AmbiguousName, Job, Store


class DaemonError(RuntimeError):
    """The daemon could not be started or stopped."""


class JobNotFound(LookupError):
    """No job matches a JOB argument (id, name or run directory)."""


class ClusterUnavailable(ValueError):
    """A job names a cluster daemon.toml does not (or daemon.toml does not read)."""


class IntentRefused(ValueError):
    """An intent with nothing to do for the job in its state: the message says so, in every client's words."""


def spec_drift(job: Job) -> str | None:
    """What the job's file says that its run refused ("file differs from run: dqn.lr refused"), or None.

    Computed from the file and the run's job.toml rather than remembered: a refusal's event scrolls
    away, but this stays true until the file is reverted or the run accepts it. Edits still within
    the daemon's debounce are left out: live and resume fields are accepted a moment later.
    """
    if not Path(job.spec_path).is_file():
        return None  # removed, or mid-rename by an editor: the job goes on with what it has
    try:
        run = runfiles.read_run_spec(Path(job.run_dir))
    except specs.SpecError:
        return None  # a run not written yet: nothing to compare
    try:
        edited = specs.apply_overrides(specs.load(job.spec_path), job.override_values)
    except specs.SpecError:
        return "file differs from run: the file does not load (see rlsup validate)"
    fields = [change.field for change in specs.judge(run, edited).refused]
    return f"file differs from run: {', '.join(fields)} refused" if fields else None


# ---------------------------------------------------------------------------------------------
# Jobs


def submit(spec_path: str | Path, *, name: str | None = None, priority: int | None = None,
           cluster: str | None = None, home: Path | None = None, start_daemon: bool = True, copy: bool = False,
           prepare: Callable[[Path, specs.JobSpec], object] | None = None) -> Job:
    """Validate a job file, prepare its run directory, queue it and make sure a daemon runs.

    copy snapshots the file into the run directory and binds the job to that copy. The run's job.toml
    records what "auto" networks resolved to. Raises specs.SpecError (nothing queued) when the file is
    not a valid job or its env cannot be trained, and FileAlreadyBound when
    another job follows the file and neither copy nor a name says a second one is meant. A file with a
    [sweep] table is an experiment (named name): submit_experiment() queues it and its first job is returned.
    prepare(run directory, resolved spec) fills the run before the job is queued (a fork's parent
    checkpoint); what it raises leaves nothing queued.
    """
    from rlsup.algos.envs.check import check_env_file  # imports gymnasium: only a submit pays for it

    path = Path(spec_path).expanduser().resolve()
    # An example is submitted by copy: `e` in the TUI, a newcomer's first edit, changed a file git tracks.
    copy = copy or paths.is_example(path)
    judged = judge_file(path, home=home, cluster=cluster)  # a [scheduler] alone, without seeds or a sweep: refused
    if judged.planned:
        # Judged as an experiment named after its job already, unless a name says otherwise: not judged twice.
        return submit_experiment(path, experiment=name, priority=priority, cluster=cluster, home=home,
                                 start_daemon=start_daemon, copy=copy, judged=judged if name is None else None)[0]
    loaded = judged.loaded
    # The env is made once now, so a space rlsup cannot train is refused here, not when the worker starts.
    loaded = check_env_file(loaded, path).spec
    data = judged.data
    home = home or paths.rlsup_home()
    # A name finds one job: a second job of a taken name (a --copy, a fork, --name) is name-2, name-3…
    wanted = specs.sanitize_name(loaded.job.name if name is None else name)
    unbound = functools.partial(check_unbound, path=path, meant=copy or name is not None)
    for _ in range(NAME_ATTEMPTS):  # a try is lost only to another client's job of the name, which was queued
        with Store(home) as store:
            unbound(store)  # before anything is made: the common refusal costs nothing
            free = store.free_name(wanted)
        overrides = specs.make_overrides(loaded, name=None if name is None and free == loaded.job.name else free,
                                         priority=priority, cluster=cluster)
        job = queue_job(path, data, specs.apply_overrides(loaded, overrides), overrides, home, copy, prepare, unbound)
        if job is not None:
            break
    else:
        raise NameTaken(f"other jobs took the name {wanted} and the next free ones while this submit made its run "
                        f"{NAME_ATTEMPTS} times; submit again")
    if start_daemon:
        ensure_daemon(home)
    return job


NAME_ATTEMPTS = 100


def queue_job(path: Path, data: bytes, effective: specs.JobSpec, overrides: dict, home: Path, copy: bool,
              prepare: Callable[[Path, specs.JobSpec], object] | None, room: Callable[[Store], None]) -> Job | None:
    """Make a lone job's run and queue it; None, its run removed, where another job took its name meanwhile.

    The name and room(store) (which raises) are decided again in the insert's transaction (BEGIN IMMEDIATE:
    one writer's): clients submitting at once all found the name free before it.
    """
    run_dir = paths.new_run_dir(effective.job.name, home, runs_root(effective, home))
    try:
        prepare_run(run_dir, effective)
        if prepare is not None:
            prepare(run_dir, effective)
        followed = snapshot(data, run_dir) if copy else path
        with Store(home) as store, store.transaction():
            room(store)
            if store.free_name(effective.job.name) == effective.job.name:
                return store.submit(**spec_columns(effective), spec_path=followed, run_dir=run_dir,
                                    spec_seen=specs.file_digest(data), overrides=overrides,
                                    step=lineage.start_step(run_dir))
    except BaseException:
        shutil.rmtree(run_dir, ignore_errors=True)  # just made, empty of training: no orphan run left behind
        raise
    shutil.rmtree(run_dir, ignore_errors=True)
    return None


def prepare_run(run_dir: Path, effective: specs.JobSpec) -> None:
    """A new run's job.toml and the import paths its worker may use."""
    from rlsup.algos.envs.check import import_roots

    runfiles.write_run_spec(run_dir, effective)
    import_trust.write_import_paths(run_dir, import_roots(effective.env))


def submit_experiment(spec_path: str | Path, *, seeds: tuple[int, ...] | None = None, experiment: str | None = None,
                      priority: int | None = None, cluster: str | None = None, home: Path | None = None,
                      start_daemon: bool = True, copy: bool = False,
                      judged: JudgedFile | None = None) -> list[Job]:
    """Queue one job per [sweep] variant and seed (the file's seed without seeds), all driven by the file.

    Each job holds its seed, name and swept values as pinned overrides, so an edit of the file (a larger
    total_steps) reaches every job by its own edit rules. experiment defaults to the job's name, and then a
    file bound to lone jobs or another experiment's needs copy (every job follows one copy). Raises
    as submit() does, experiments.SeedsError for too many jobs, and NameTaken when the experiment already
    has one of the planned jobs. judged: submit()'s judgement of the same file and experiment, not made twice.
    """
    from rlsup.algos.envs.check import check_env_file  # imports gymnasium: only a submit pays for it

    path = Path(spec_path).expanduser().resolve()
    copy = copy or paths.is_example(path)  # as submit() does
    home = home or paths.rlsup_home()
    judged = judged or judge_file(path, seeds=seeds, experiment=experiment or "", home=home, cluster=cluster)
    loaded, name, planned, settings, data = (judged.loaded, judged.experiment, judged.planned, judged.settings,
                                             judged.data)
    with Store(home) as store:
        room = functools.partial(check_experiment_room, path=path, name=name, planned=planned,
                                 meant=copy or experiment is not None, settings=settings)
        room(store)  # before anything is made: the common refusal costs nothing
    resolved: list[tuple[specs.JobSpec, specs.JobSpec]] = []  # (a variant without seed, its env-checked spec)
    prepared = []
    for job in planned:
        spec = experiments.variant_spec(loaded, job)
        # The env is made once per distinct variant, not once per seed: seeds resolve alike.
        unseeded = spec.replace("job", seed=0)
        checked = next((done for key, done in resolved if key == unseeded), None)
        if checked is None:
            checked = check_env_file(spec, path).spec
            resolved.append((unseeded, checked))
        overrides = {**specs.make_overrides(loaded, priority=priority, cluster=cluster),
                     **specs.pin_overrides(loaded, {**job.values, "job.name": job.name})}
        prepared.append((job, overrides, specs.apply_overrides(checked, overrides)))
    return queue_experiment(path, data, name, prepared, home, copy, start_daemon, room,
                            decides=(settings, loaded.job.seed) if settings else None)


def queue_experiment(path: Path, data: bytes, name: str, prepared: list, home: Path, copy: bool,
                     start_daemon: bool, room: Callable[[Store], None], decides: tuple | None = None) -> list[Job]:
    """Make the run directories and queue every job in one transaction: all of them, or none; with decides
    (its scheduler and seed), each run holds at the first rung and the store keeps the scheduler.

    room(store) refuses what the experiment has no room for, again in the insert's transaction (BEGIN
    IMMEDIATE: one writer's): clients joining at once all found their seeds free before it."""
    from rlsup.daemon.deciding import first_hold
    from rlsup.jobs.standings import save_scheduler

    run_dirs: list[Path] = []
    try:
        for job, _, effective in prepared:
            run_dirs.append(paths.new_run_dir(job.name, home, runs_root(effective, home)))
            prepare_run(run_dirs[-1], effective)
            if decides:
                write_hold(run_dirs[-1], first_hold(decides[0]))
        followed = snapshot(data, run_dirs[0]) if copy else path  # one copy drives the whole experiment
        with Store(home) as store, store.transaction():
            room(store)
            queued = [store.submit(**spec_columns(effective), spec_path=followed, run_dir=run_dir,
                                   spec_seen=specs.file_digest(data), overrides=overrides, experiment=name)
                      for (_, overrides, effective), run_dir in zip(prepared, run_dirs)]
            if decides:
                save_scheduler(store, name, *decides)
    except BaseException:
        for run_dir in run_dirs:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    if start_daemon:
        ensure_daemon(home)
    return queued


def runs_root(spec: specs.JobSpec, home: Path) -> Path | None:
    """Where the job's run directory goes: its cluster's run_root, which the cluster's nodes see (None: this home)."""
    from rlsup.daemon.clusters import UnknownCluster, cluster_named
    from rlsup.daemon.scheduler import SettingsError
    from rlsup.daemon.settings_file import load_settings

    if not spec.job.cluster:
        return None
    try:
        return Path(cluster_named(load_settings(home).clusters, spec.job.cluster).run_root)
    except (UnknownCluster, SettingsError) as error:
        raise ClusterUnavailable(f"[job] cluster = {spec.job.cluster!r}: {error}") from None


def snapshot(data: bytes, run_dir: Path) -> Path:
    """Write the job file's bytes into the run: the copy is what the daemon watches for this job."""
    copy = run_dir / paths.SOURCE_COPY
    atomic.write_bytes(copy, data)  # never through a link
    return copy


def find_job(reference: str, home: Path | None = None) -> Job:
    """The job a JOB argument names (id, name or run directory); raises JobNotFound."""
    home = Path(home) if home else paths.home_path()
    if store_file.exists(home):
        with Store(home) as store:
            job = one_job(store, reference)
        if job is not None:
            return job
    elif run_directory(reference) is None and live_foreground_run(reference, home) is None:
        raise JobNotFound(f"no jobs yet in {home}; queue one with `rlsup submit JOB.toml`")
    raise JobNotFound(not_found_message(reference, home))


def one_job(store: Store, reference: str) -> Job | None:
    """store.find_job, with a name that several jobs share refused (JobNotFound naming their ids)."""
    try:
        return store.find_job(reference)
    except AmbiguousName as error:
        raise JobNotFound(str(error)) from None


def run_directory(reference: str) -> Path | None:
    path = Path(reference).expanduser()
    return path.resolve() if (path / paths.JOB_FILE).is_file() else None


def live_foreground_run(reference: str, home: Path) -> foreground.Registration | None:
    """The live foreground run a reference names, by its run directory or by its name."""
    run_dir = run_directory(reference)
    return next((run for run in foreground.live_runs(home)
                 if run.run_dir == run_dir or run.name == reference.strip()), None)


def not_found_message(reference: str, home: Path, action: str = "show") -> str:
    """Why no job answers to reference; for a foreground run or a run directory, what to do instead of action."""
    run_dir = run_directory(reference)
    # A run directory no job owns, or a name no job holds, can be a foreground `rlsup run`'s: the daemon does
    # not manage it, so the answer says what does (its terminal).
    live = live_foreground_run(reference, home)
    if live is not None:
        return f"{run_dir or reference.strip()} is {foreground_advice(live.pid, live.run_dir, action)}"
    if run_dir is None:
        return f"no job {reference!r} (give a job id, a job name or a run directory)"
    return f"{run_dir} is a run directory that no queued job owns; continue it with: rlsup run --resume {run_dir}"


def intent_refusal(job: Job, desired: Desired) -> str | None:
    """Why desired has nothing to do for the job in its state, in one sentence; None when it applies."""
    if jobstate.intent_applies(job.state, desired):
        return held_refusal(job) if desired is Desired.RUNNING else None
    problem = jobstate.NOTHING_TO_DO[desired]
    if job.state is State.DONE and desired is Desired.RUNNING:
        problem += f"; it reached its budget: raise total_steps in {job.spec_path} to train further"
    return f"job {job.id} is {job.state}: {problem}"


def set_intent(reference: str, desired: Desired, *, home: Path | None = None,
               start_daemon: bool = True) -> Job:
    """Record pause / resume / kill for a job; the daemon applies it within a tick. Raises IntentRefused (nothing
    recorded) when the intent has nothing to do for the job in its state."""
    with Store(home) as store:
        job = one_job(store, reference)
        if job is None:
            raise JobNotFound(not_found_message(reference, store.home, desired.verb))
        refusal = intent_refusal(job, desired)
        if refusal is not None:
            raise IntentRefused(refusal)
        job = store.set_desired(job.id, desired)
    if start_daemon and needs_daemon(job):
        ensure_daemon(home)
    return job


def experiment_jobs(reference: str, home: Path | None = None) -> list[Job]:
    """The jobs of the experiment a reference names; none when it names no experiment (a job id never does)."""
    if reference.strip().isdigit():
        return []
    home = Path(home) if home else paths.home_path()
    if not store_file.exists(home):
        return []
    with Store(home) as store:
        return store.experiment_jobs(reference.strip())


def set_group_intent(experiment: str, desired: Desired, *, home: Path | None = None,
                     start_daemon: bool = True) -> tuple[list[Job], list[Job]]:
    """Record an intent for each job of an experiment it applies to (each takes it by its own rules).

    A kill leaves done jobs be: their results stand. Returns (the jobs it was recorded for, all the jobs).
    """
    with Store(home) as store, store.transaction():
        jobs = store.experiment_jobs(experiment)
        affected = [store.set_desired(job.id, desired) for job in jobs if group_intent_applies(job, desired)]
    if not jobs:
        raise JobNotFound(f"no experiment {experiment!r}")
    if start_daemon and any(needs_daemon(job) for job in affected):
        ensure_daemon(home)
    return affected, jobs


def group_intent_applies(job: Job, desired: Desired) -> bool:
    if desired is Desired.KILLED and job.state is State.DONE:
        return False
    return jobstate.intent_applies(job.state, desired)


def needs_daemon(job: Job) -> bool:
    """Whether the intent has anything for a daemon to do (resuming a done job has not)."""
    if job.state in ACTIVE or job.state is State.QUEUED:
        return True
    return jobstate.intent_target(job.state, job.desired, new_intent=True) is not None


# ---------------------------------------------------------------------------------------------
# The daemon process


@dataclass(frozen=True)
class DaemonStatus:
    running: bool
    pid: int | None
    home: Path


def lock_path(home: Path) -> Path:
    return Path(home) / paths.DAEMON_LOCK


def daemon_status(home: Path | None = None) -> DaemonStatus:
    """Whether a daemon holds this home's lock, and its pid."""
    home = Path(home) if home else paths.home_path()
    found = locks.holder(lock_path(home))
    return DaemonStatus(found.held, found.pid, home)


def ensure_daemon(home: Path | None = None, *, timeout_s: float = 15.0) -> DaemonStatus:
    """Start a detached daemon for this home unless one runs; wait until it holds the lock."""
    home = Path(home) if home else paths.rlsup_home()
    status = daemon_status(home)
    if status.running:
        return status
    environment = dict(os.environ, RLSUP_HOME=str(home))
    process = subprocess.Popen(import_trust.module_command("rlsup.daemon"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                               env=environment, cwd=home, close_fds=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = daemon_status(home)
        if status.running and status.pid:
            process.stderr.close()
            return status
        if process.poll() is not None:
            # Exited at once: a daemon started by another client won the lock, or it failed.
            status = daemon_status(home)
            if status.running:
                return status
            error = process.stderr.read().decode(errors="replace").strip()
            raise DaemonError(f"the daemon did not start (exit {process.returncode}): {error or _log_tail(home)}")
        time.sleep(0.05)
    raise DaemonError(f"the daemon did not take its lock within {timeout_s:.0f} s; see {home / paths.DAEMON_LOG}")


def stop_daemon(home: Path | None = None, *, timeout_s: float = 15.0) -> bool:
    """Ask the daemon to exit (workers keep running) and wait; False when none was running."""
    home = Path(home) if home else paths.rlsup_home()
    status = daemon_status(home)
    if not status.running or not status.pid:
        return False
    os.kill(status.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not daemon_status(home).running:
            return True
        time.sleep(0.05)
    raise DaemonError(f"the daemon (pid {status.pid}) did not stop within {timeout_s:.0f} s")


def _log_tail(home: Path) -> str:
    return "\n".join(runfiles.tail_lines(Path(home) / paths.DAEMON_LOG, 5))
