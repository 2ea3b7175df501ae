"""An experiment that decides, played through a real store and the daemon's own decisions, with no worker:
members reach their holds, report, and are decided (tests of the views, the CLI and the TUI share it)."""
from __future__ import annotations

from pathlib import Path

from rlsup_testing import cartpole_job

from rlsup import client
from rlsup.daemon import deciding
from rlsup.jobs.record import Job
from rlsup.jobs.state import State
from rlsup.jobs.store import Store
from rlsup.run.holds import STANDING_METRICS, Standing

ASHA = '\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [600, 1_200]\nkeep = 0.5\n'
PBT = ('\n[scheduler]\nkind = "pbt"\nmetric = "eval_return"\ninterval = 500\nquantile = 0.25\n'
       'perturb = { "dqn.lr" = [0.8, 1.25] }\n')


def experiment(home: Path, directory: Path, name: str, scheduler: str, total_steps: int,
               seeds: tuple[int, ...] = (1, 2, 3, 4)) -> list[Job]:
    """Queued members of an experiment with a [scheduler], no daemon started."""
    path = cartpole_job(directory, name=name, total_steps=total_steps, checkpoint_every=0)
    path.write_text(path.read_text() + scheduler)
    return client.submit_experiment(path, seeds=seeds, home=home, start_daemon=False)


def start(store: Store, job_id: int) -> None:
    for state in (State.STARTING, State.RUNNING):
        store.transition(job_id, state, "test")


def reach(store: Store, job_id: int, step: int, value: float, label: str) -> None:
    """The member trains to its hold at step and pauses there having measured value; then the daemon decides."""
    if store.job(job_id).state is State.QUEUED:
        start(store, job_id)
    store.transition(job_id, State.PAUSED, f"reached {label} at step {step:,}", step=step)
    values = {metric: None for metric in STANDING_METRICS}
    values["eval_return"] = value
    with store.transaction():
        from rlsup.jobs import standings
        standings.record_standing(store, job_id, Standing(step, values))
    deciding.decide(store)


def finish(store: Store, job_id: int) -> None:
    """The member trains on to its budget."""
    job = store.job(job_id)
    if job.state is State.QUEUED:
        start(store, job_id)
    store.transition(job_id, State.DONE, "budget reached", step=job.total_steps)
