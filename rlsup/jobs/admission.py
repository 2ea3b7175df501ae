"""What a submit admits: a job file judged as submit and validate alike, and whether the queue has room for its jobs."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlsup import own_files, paths, spec as specs
from rlsup.spec import experiments
from rlsup.jobs import store_file
from rlsup.jobs.gpu_room import check_gpus
from rlsup.jobs.record import Job, jobs_following
from rlsup.jobs.state import State
from rlsup.jobs.store import Store


@dataclass(frozen=True)
class JudgedFile:
    """A job file as a submit with these seeds and experiment takes it, before any env is made."""

    loaded: specs.JobSpec
    data: bytes                              # the file's bytes as judged: what a submit digests and copies
    text: str
    experiment: str                          # "" for a lone job
    planned: list[experiments.PlannedJob]    # an experiment's jobs; [] for a lone job
    settings: specs.SchedulerSettings | None


def judge_file(path: Path, *, seeds: tuple[int, ...] | None = None, experiment: str | None = None,
               home: Path | None = None, cluster: str | None = None) -> JudgedFile:
    """The one judgement of a job file that `rlsup submit` and `rlsup validate` make (validate said "ok" of a
    [scheduler] in a lone job, which submit refused): raises SpecError or SeedsError, as submit would. Without
    seeds, experiment or a [sweep] it is a lone job; experiment "" is one named after the job. Its jobs' GPUs are
    judged against this machine's where known (gpu_room.check_gpus; cluster: submit's --cluster)."""
    read: list[bytes] = []

    def read_once(file: Path) -> bytes:  # the one read of the file: the bytes judged are the bytes a submit queues
        read.append(own_files.read_regular(file))
        return read[-1]

    loaded = specs.load(path, read=read_once)  # first: it says why a file cannot be read
    data = read[-1]
    text = data.decode("utf-8")  # load decoded it already
    sweep = specs.sweep_of(text, file=str(path))
    where = home or paths.home_path()  # read only: validate leaves no home behind
    if seeds is None and experiment is None and not sweep.fields:
        check_gpus([loaded], path, text, where, cluster=cluster)
        return JudgedFile(loaded, data, text, "", [], scheduler_of(path, text, loaded, members=1))
    name = specs.sanitize_name(experiment or loaded.job.name)
    planned = experiments.plan(sweep, seeds, name)
    experiments.check_variants(loaded, planned, str(path), text)
    check_gpus([experiments.variant_spec(loaded, job) for job in planned], path, text, where, cluster=cluster)
    # The members it has count: one more seed joins an experiment that decides as two do.
    members = len(planned) + len(members_of(name, where))
    return JudgedFile(loaded, data, text, name, planned, scheduler_of(path, text, loaded, members=members))


def members_of(experiment: str, home: Path) -> list[Job]:
    """The experiment's jobs so far; none where home has no store (validate makes none)."""
    if not store_file.exists(home):
        return []
    with Store(home) as store:
        return store.experiment_jobs(experiment)


def scheduler_of(path: Path, text: str, loaded: specs.JobSpec, *, members: int) -> specs.SchedulerSettings | None:
    """The file's [scheduler], checked against the job and the fork rules; None without one. Raises SpecError
    at its line for a table with one member to decide among (members counts those its experiment has)."""
    from rlsup.run.lineage import perturb_refused

    settings = specs.scheduler_of(text, loaded, file=str(path),
                                  fork_refuses=lambda name: perturb_refused(loaded, name))
    located = specs.Located(str(path), text)
    if settings is not None and members < 2:
        raise specs.SpecError([located.problem(("scheduler",), (
            "decides among an experiment's members, and this would be its only one: give the file a [sweep], "
            "submit more seeds (--seeds 1-4), or add these to an experiment that decides (--experiment NAME)"))])
    return settings


class FileAlreadyBound(ValueError):
    """The job file already drives a job: a second job from it needs --copy or --name."""


class NameTaken(ValueError):
    """A new job's name is another's: an experiment's of the same seed and variant, or one a lone job took first."""


def bound_message(path: Path, bound: list[Job]) -> str:
    jobs = ", ".join(f"job {job.id} ({job.name}, {job.state})" for job in bound)
    return (f"{path} already drives {jobs}, and its edits would reach every job it drives; submit again with "
            f"--copy (the new job follows a copy in its run directory) or --name NEW (both follow the file)")


def check_unbound(store: Store, *, path: Path, meant: bool) -> None:
    """Refuse a second job from a file that drives one unless meant (--copy, --name)."""
    bound = jobs_following(path, store.jobs())
    if bound and not meant:
        raise FileAlreadyBound(bound_message(path, bound))


def check_experiment_room(store: Store, *, path: Path, name: str, planned: list, meant: bool,
                          settings: specs.SchedulerSettings | None) -> None:
    """Refuse jobs the experiment already has, another [scheduler] than its own, and a file bound outside it
    unless meant (--copy, --experiment)."""
    jobs = store.jobs()
    bound = [job for job in jobs_following(path, jobs) if job.experiment != name]
    if bound and not meant:
        raise FileAlreadyBound(bound_message(path, bound).replace("--name NEW", "--experiment NEW"))
    taken = {job.name for job in jobs if job.experiment == name and job.state is not State.KILLED}
    clash = [job.name for job in planned if job.name in taken]
    if clash:
        raise NameTaken(f"experiment {name} already has job {clash[0]}; give other seeds, or --experiment NEW")
    check_same_scheduler(store, name, settings)


def check_same_scheduler(store: Store, name: str, settings: specs.SchedulerSettings | None) -> None:
    """New members join a deciding experiment (at its first rung or interval) only under its own [scheduler]."""
    from rlsup.jobs.standings import scheduler

    if store.experiment_jobs(name) and scheduler(store, name) != settings:
        kind = "another" if scheduler(store, name) is not None else "no"
        raise NameTaken(f"experiment {name} decides with {kind} [scheduler]; give --experiment NEW")
