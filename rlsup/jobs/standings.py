"""The store's part of experiments that decide: their [scheduler], members' standings, and decisions taken."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from rlsup.jobs.record import EventKind, Job
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Store
from rlsup.run.holds import Standing
from rlsup.spec.scheduler_table import Settings, from_json, settings_json


# What a decision did to a member, as the store holds it: ASHA's two, and PBT's (a forked member is the new one).
PROMOTED, STOPPED = "promoted", "stopped"
CONTINUED, REPLACED, FORKED = "continued", "replaced", "forked"
# A member that cannot report any more: what it reported still counts, and no comparison waits for it.
GONE = (State.KILLED, State.FAILED, State.DONE)


@dataclass(frozen=True)
class Decision:
    """One decision the store holds: for a member (job id) at a step, and why."""

    job_id: int
    step: int
    verdict: str   # one of the five above
    reason: str
    time: float


def metric_value(value: float | None) -> float:
    """A standing's metric as members are ranked by it: one not measured is NaN, which ranks last."""
    return math.nan if value is None else value


def save_scheduler(store: Store, experiment: str, settings: Settings, seed: int) -> None:
    """Inside submit's transaction: the experiment's jobs and its scheduler are queued together or not at all
    (more members later find it there: client.check_same_scheduler)."""
    store.connection.execute("INSERT OR IGNORE INTO schedulers (experiment, settings, seed) VALUES (?, ?, ?)",
                             (experiment, settings_json(settings), seed))


def schedulers(store: Store) -> dict[str, tuple[Settings, int]]:
    """Every experiment that decides, with its settings and seed (a row that does not read is left out)."""
    rows = store.connection.execute("SELECT experiment, settings, seed FROM schedulers ORDER BY experiment")
    found = {}
    for row in rows.fetchall():
        settings = from_json(row["settings"])
        if settings is not None:
            found[row["experiment"]] = (settings, int(row["seed"]))
    return found


def scheduler(store: Store, experiment: str) -> Settings | None:
    """One experiment's scheduler (None without one): its row alone, not every experiment's."""
    row = store.connection.execute("SELECT settings FROM schedulers WHERE experiment = ?", (experiment,)).fetchone()
    return from_json(row["settings"]) if row is not None else None


def record_standing(store: Store, job_id: int, standing: Standing) -> None:
    """A member's metrics at a hold; the first one kept (a member holds once per step, even if restarted)."""
    store.connection.execute("INSERT OR IGNORE INTO standings (job_id, step, measured) VALUES (?, ?, ?)",
                             (job_id, standing.step, json.dumps(standing.to_json())))


def standings(store: Store, job_ids: list[int]) -> dict[int, list[Standing]]:
    """Each member's standings in step order."""
    found: dict[int, list[Standing]] = {job_id: [] for job_id in job_ids}
    marks = ",".join("?" * len(job_ids))
    rows = store.connection.execute(f"SELECT job_id, measured FROM standings WHERE job_id IN ({marks}) "
                                    "ORDER BY job_id, step", job_ids).fetchall() if job_ids else []
    for row in rows:
        standing = Standing.from_json(_json(row["measured"]))
        if standing is not None:
            found[row["job_id"]].append(standing)
    return found


def decisions(store: Store, job_ids: list[int]) -> list[Decision]:
    marks = ",".join("?" * len(job_ids))
    rows = store.connection.execute(f"SELECT * FROM decisions WHERE job_id IN ({marks}) ORDER BY time, job_id",
                                    job_ids).fetchall() if job_ids else []
    return [Decision(row["job_id"], row["step"], row["verdict"], row["reason"], row["time"]) for row in rows]


def record_decision(store: Store, decision: Decision, *, resume: bool) -> bool:
    """The decision, its event and its action (a promoted member waiting at the step is queued again; a
    stopped one keeps its pause with the reason) in one transaction: a daemon killed at any point has
    either done all of it or none. False when the store already held a decision there (nothing done).

    A user's intent wins: a member its user killed, or paused, is not queued again. It is read in this same
    transaction, since a kill can commit while the daemon decides (and a PBT generation makes its forks)."""
    with store.transaction():
        inserted = store.connection.execute(
            "INSERT OR IGNORE INTO decisions (job_id, step, verdict, reason, time) VALUES (?, ?, ?, ?, ?)",
            (decision.job_id, decision.step, decision.verdict, decision.reason, decision.time)).rowcount
        if not inserted:
            return False
        job = store.job(decision.job_id)
        overruled = user_intent(store, job) if job is not None else None
        store.add_event(decision.job_id, EventKind.DECISION, decision.reason)
        waiting = job is not None and job.state is State.PAUSED and job.step >= decision.step
        if waiting and resume and overruled is None:
            store.transition(job.id, State.QUEUED, decision.reason, desired=Desired.RUNNING)
        elif waiting and resume:
            store.update(job.id, reason=f"{decision.reason}; it stays paused: {overruled.request}")
        elif waiting:
            store.update(job.id, reason=decision.reason)
    return True


def user_intent(store: Store, job: Job) -> Desired | None:
    """What the member's user asked that no decision may undo: a kill (only clients ask one), or a pause asked
    since the scheduler last decided for it (a member paused at its hold by its worker wants `paused` too, so
    the intent's own event tells them apart); None when its user asked neither."""
    if job.desired is Desired.KILLED:
        return Desired.KILLED
    latest = store.connection.execute(
        "SELECT kind, message FROM events WHERE job_id = ? AND kind IN (?, ?) ORDER BY id DESC LIMIT 1",
        (job.id, EventKind.INTENT.value, EventKind.DECISION.value)).fetchone()
    paused = (job.desired is Desired.PAUSED and latest is not None and latest["kind"] == EventKind.INTENT.value
              and latest["message"] == Desired.PAUSED.request)
    return Desired.PAUSED if paused else None


def note_unfinished_fork(store: Store, experiment: str, run_dir: str) -> None:
    """Before a fork's directory is made: a daemon killed before its generation commits leaves it recorded."""
    with store.transaction():
        store.connection.execute("INSERT OR IGNORE INTO unfinished_forks (run_dir, experiment) VALUES (?, ?)",
                                 (run_dir, experiment))


def forget_unfinished_forks(store: Store, run_dirs: list[str]) -> None:
    """In the generation's transaction (their jobs hold them now), or once they are deleted."""
    with store.transaction():
        store.connection.executemany("DELETE FROM unfinished_forks WHERE run_dir = ?", [(path,) for path in run_dirs])


def orphaned_forks(store: Store, experiment: str) -> list[str]:
    """The experiment's fork directories that were made and that no job holds: their generation never committed."""
    rows = store.connection.execute(
        "SELECT run_dir FROM unfinished_forks WHERE experiment = ? AND run_dir NOT IN "
        "(SELECT run_dir FROM jobs WHERE run_dir IS NOT NULL)", (experiment,)).fetchall()
    return [row["run_dir"] for row in rows]


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None
