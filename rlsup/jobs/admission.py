"""Whether the queue has room for new jobs: a file that drives a job already, a name taken, an experiment's seeds."""
from __future__ import annotations

from pathlib import Path

from rlsup import spec as specs
from rlsup.jobs.record import Job, jobs_following
from rlsup.jobs.state import State
from rlsup.jobs.store import Store


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
