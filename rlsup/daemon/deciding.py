"""Experiments that decide, in the daemon: members' standings go in, the scheduler's verdicts are carried out."""
from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from rlsup.daemon.pbt_generations import decide_pbt
from rlsup.decisions import asha
from rlsup.decisions.asha import AshaSettings
from rlsup.decisions.ranking import Report
from rlsup.jobs import standings
from rlsup.jobs.record import Job
from rlsup.jobs.store import Store, StoreBusy
from rlsup.run.exit import EXIT_HELD, read_exit
from rlsup.run.holds import Hold, clear_hold, write_hold
from rlsup.spec.scheduler_table import Settings

log = logging.getLogger(__name__)


def rung_hold(settings: AshaSettings, rung: int) -> Hold:
    """Where a member pauses for rung number `rung` (0 for the first)."""
    return Hold(settings.rungs[rung], f"rung {rung + 1} of ASHA", evaluate=settings.metric == "eval_return")


def first_hold(settings: Settings) -> Hold:
    """Where every member of a new experiment first pauses: ASHA's first rung, PBT's first interval."""
    if isinstance(settings, AshaSettings):
        return rung_hold(settings, 0)
    return Hold(settings.interval, "generation 1 of PBT", evaluate=settings.metric == "eval_return")


def record_standing(store: Store, job: Job, code: int | None) -> None:
    """What a member that paused at its hold measured there, from its exit.json (in finish's transaction)."""
    if code != EXIT_HELD or not job.experiment:
        return
    record = read_exit(Path(job.run_dir))
    if record is not None and record.standing is not None:
        standings.record_standing(store, job.id, record.standing)


def decide(store: Store) -> None:
    """Take every decision the standings now call for. Pure in what it decides (decisions/), and each one is
    recorded with its action in one transaction, so a daemon killed anywhere re-derives the rest, none twice."""
    for experiment, (settings, seed) in standings.schedulers(store).items():
        try:
            members = store.experiment_jobs(experiment)
            if isinstance(settings, AshaSettings):
                decide_asha(store, settings, members)
            else:
                decide_pbt(store, settings, seed, members)
        except (StoreBusy, sqlite3.DatabaseError):
            raise  # the store's fault: the daemon's loop tries again, or stops for a store it cannot read
        except Exception:  # one experiment's fault never stops the daemon or another experiment's decisions
            log.exception("experiment %s: its decisions failed; tried again at the next reconcile", experiment)


def decide_asha(store: Store, settings: AshaSettings, members: list[Job]) -> None:
    ids = [job.id for job in members]
    rung_of = {step: number for number, step in enumerate(settings.rungs)}
    reports = [Report(job_id, standing.step, standings.metric_value(standing.values.get(settings.metric)))
               for job_id, held in standings.standings(store, ids).items() for standing in held]
    decided = {(decision.job_id, rung_of[decision.step]): decision.verdict == standings.PROMOTED
               for decision in standings.decisions(store, ids) if decision.step in rung_of}
    gone = [job.id for job in members if job.state in standings.GONE]
    by_id = {job.id: job for job in members}
    for verdict in asha.decide(settings, ids, reports, decided, gone):
        next_hold(Path(by_id[verdict.member].run_dir), settings, verdict)
        outcome = standings.PROMOTED if verdict.promoted else standings.STOPPED
        decision = standings.Decision(verdict.member, settings.rungs[verdict.rung], outcome, verdict.reason,
                                      time.time())
        standings.record_decision(store, decision, resume=verdict.promoted)


def next_hold(run_dir: Path, settings: AshaSettings, verdict: asha.Verdict) -> None:
    """Before the verdict is recorded: a promoted member holds at the next rung, or after the last at none (it
    trains to its end); a stopped one at none, so that a resume by hand trains it on. Written again, alike,
    should the daemon die before recording it."""
    if verdict.promoted and verdict.rung + 1 < len(settings.rungs):
        write_hold(run_dir, rung_hold(settings, verdict.rung + 1))
    else:
        clear_hold(run_dir)
