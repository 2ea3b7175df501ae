"""The SQLite store: jobs, their events and hardware samples; the daemon's queue and the UI's source."""
from __future__ import annotations

import enum
import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from rlsup import paths
from rlsup.jobs import state as jobstate
from rlsup.jobs.record import (Event, EventKind, Job, JobChanges, Process, SentSignal, SignalKind, change_columns,
                               event_from_row, job_from_row)
from rlsup.jobs.state import ACTIVE, Desired, State
from rlsup.spec import numbered_name
from rlsup.jobs.store_file import (StoreBusy, StoreError, StoreLost, Transaction, create_private, mark_made,
                                   refuse_if_lost, translated, turn_to_wal)

if TYPE_CHECKING:
    from typing_extensions import Unpack

# The record types are the store's API as much as Store is: `from rlsup.jobs.store import Job` keeps working.
__all__ = ["Event", "EventKind", "Job", "JobChanges", "MIGRATIONS", "Process", "SCHEMA_VERSION", "SentSignal",
           "SignalKind", "Store", "StoreBusy", "StoreError", "StoreLost"]

# Each entry upgrades the schema by one version; PRAGMA user_version counts the ones applied.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,  -- also the submission order
        name TEXT NOT NULL,
        spec_path TEXT NOT NULL,               -- the user's file, absolute, watched for edits
        spec_seen TEXT,                        -- sha256 of that file as last applied or refused
        overrides TEXT NOT NULL DEFAULT '{}',  -- command-line values that win over the file
        run_dir TEXT NOT NULL,
        algo TEXT NOT NULL DEFAULT '',
        env TEXT NOT NULL DEFAULT '',
        state TEXT NOT NULL,
        desired TEXT NOT NULL,
        desired_seq INTEGER NOT NULL DEFAULT 1, -- bumped by every client intent
        applied_seq INTEGER NOT NULL DEFAULT 0, -- the intent the daemon last settled
        priority INTEGER NOT NULL DEFAULT 0,
        gpus_wanted INTEGER NOT NULL DEFAULT 0,
        gpus TEXT NOT NULL DEFAULT '',         -- assigned GPU indices, comma-separated, while active
        pid INTEGER,
        process_start REAL,                    -- psutil create_time, to recognise the pid later
        boot_id TEXT,
        signal_sent TEXT,                      -- pause / kill, while waiting for the exit
        signal_time REAL,
        restarts INTEGER NOT NULL DEFAULT 0,
        max_restarts INTEGER NOT NULL DEFAULT 3,
        not_before REAL NOT NULL DEFAULT 0,    -- restart backoff: not scheduled before this time
        step INTEGER NOT NULL DEFAULT 0,
        total_steps INTEGER NOT NULL DEFAULT 0,
        exit_code INTEGER,
        reason TEXT NOT NULL DEFAULT '',
        submitted REAL NOT NULL,
        started REAL,
        finished REAL,
        updated REAL NOT NULL
    );
    CREATE INDEX jobs_state ON jobs(state);
    CREATE INDEX jobs_name ON jobs(name);
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        time REAL NOT NULL,
        job_id INTEGER REFERENCES jobs(id),
        kind TEXT NOT NULL,                    -- an EventKind (jobs/record.py): state, intent, edit,
                                               -- refused, signal, daemon, adopted, waiting, checkpoint,
                                               -- feature off, moving, moved, deleted, kept, decision
        from_state TEXT,
        to_state TEXT,
        message TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX events_job ON events(job_id, id);
    CREATE TABLE hardware_samples (
        time REAL NOT NULL,
        sample TEXT NOT NULL                   -- hardware.Sample as JSON
    );
    CREATE INDEX hardware_time ON hardware_samples(time);
    """,
    # Seeds and variants submitted together: the experiment's name on each of its jobs ("" for a lone job).
    """
    ALTER TABLE jobs ADD COLUMN experiment TEXT NOT NULL DEFAULT '';
    CREATE INDEX jobs_experiment ON jobs(experiment);
    """,
    # Clusters: where the job runs ([job] cluster, "" for this machine), and while active its worker's
    # name there (a Ray submission id) and the node it landed on.
    """
    ALTER TABLE jobs ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN worker_ref TEXT;
    ALTER TABLE jobs ADD COLUMN node TEXT;
    """,
    # The run directory a move under run_root left behind, until the daemon has deleted it: only what the
    # store recorded is ever deleted, never what a file in the run names (daemon/moves.py).
    """
    ALTER TABLE jobs ADD COLUMN moved_from TEXT;
    """,
    # GPU memory per GPU: what [job] gpu_memory_gb declares (0: nothing), and what the job's worker last
    # reported (bytes; NULL before its first report on a GPU), kept across pauses for placement by memory.
    """
    ALTER TABLE jobs ADD COLUMN gpu_memory_gb REAL NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN gpu_memory_bytes INTEGER;
    """,
    # Experiments that decide (jobs/standings.py): the [scheduler] each was submitted with, what each member
    # measured where the scheduler compares them, and every decision taken, once per member and step.
    """
    CREATE TABLE schedulers (experiment TEXT PRIMARY KEY, settings TEXT NOT NULL, seed INTEGER NOT NULL);
    CREATE TABLE standings (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        step INTEGER NOT NULL,                 -- the hold's step: a rung, a PBT interval
        measured TEXT NOT NULL,                -- run/holds.py Standing as JSON
        PRIMARY KEY (job_id, step)
    );
    CREATE TABLE decisions (
        job_id INTEGER NOT NULL REFERENCES jobs(id),
        step INTEGER NOT NULL,
        verdict TEXT NOT NULL,                 -- promoted, stopped, forked, replaced
        reason TEXT NOT NULL,
        time REAL NOT NULL,
        PRIMARY KEY (job_id, step)
    );
    """,
    # A PBT fork's run directory, recorded before it is made and forgotten in its generation's transaction:
    # one still here when no job has it was left by a daemon killed in between, and is deleted (only what the
    # store recorded is ever deleted, never what a file in the run names).
    """
    CREATE TABLE unfinished_forks (run_dir TEXT PRIMARY KEY, experiment TEXT NOT NULL);
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class AmbiguousName(LookupError):
    """A job name that more than one job holds: the message names their ids."""


class Store:
    """A connection to $RLSUP_HOME/rlsup.db; one per thread, cheap to open."""

    def __init__(self, home: Path | None = None, *, timeout_s: float = 10.0):
        self.home = Path(home) if home is not None else paths.rlsup_home()
        paths.ensure_private_dir(self.home)
        self.path = self.home / paths.DATABASE
        self.timeout_s = timeout_s
        if not self.path.exists():
            refuse_if_lost(self.path)  # made here before: a new file would hide every job the old one held
        create_private(self.path)
        self.connection = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None,
                                          check_same_thread=False)
        try:
            with translated(self.path, timeout_s):
                self._open()
        except BaseException:
            self.connection.close()
            raise

    def _open(self) -> None:
        self.connection.row_factory = sqlite3.Row
        self.connection.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
        # Read first, without the write lock: a reader (rlsup list) must not wait for a writer to migrate nothing.
        version = self.schema_version()
        if version == 0:
            refuse_if_lost(self.path, self.schema_version)  # emptied or replaced (checked again under the lock)
        turn_to_wal(self.connection, self.timeout_s)
        self.connection.execute("PRAGMA synchronous = NORMAL")
        self.connection.execute("PRAGMA foreign_keys = ON")
        if version != SCHEMA_VERSION:
            self._migrate()
        mark_made(self.path)

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ schema

    def _migrate(self) -> None:
        with self._write():
            version = self.schema_version()
            if version == 0:
                refuse_if_lost(self.path, self.schema_version)  # emptied or remade under a home whose jobs it held
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {version}; this rlsup knows up to "
                                 f"{SCHEMA_VERSION}: upgrade rlsup")
            for number in range(version, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[number]):
                    self.connection.execute(statement)
                self.connection.execute(f"PRAGMA user_version = {number + 1}")

    def schema_version(self) -> int:
        return self.connection.execute("PRAGMA user_version").fetchone()[0]

    def data_version(self) -> int:
        """Changes whenever another connection commits: the daemon's cheap wake-up check."""
        return self.connection.execute("PRAGMA data_version").fetchone()[0]

    def _write(self) -> Transaction:
        return Transaction(self.connection, self.path, self.timeout_s)

    def transaction(self) -> Transaction:
        """Writes inside it commit together or not at all (an experiment's jobs are queued at once)."""
        return self._write()

    # ------------------------------------------------------------------ reading

    def jobs(self, states: Iterable[State] | None = None) -> list[Job]:
        """Jobs in submission order, optionally only those in the given states."""
        if states is None:
            rows = self.connection.execute("SELECT * FROM jobs ORDER BY id").fetchall()
        else:
            wanted = [State(state).value for state in states]
            marks = ",".join("?" * len(wanted))
            rows = self.connection.execute(f"SELECT * FROM jobs WHERE state IN ({marks}) ORDER BY id",
                                           wanted).fetchall()
        return [_job(row) for row in rows]

    def job(self, job_id: int) -> Job | None:
        row = self.connection.execute("SELECT * FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
        return _job(row) if row else None

    def find_job(self, reference: str | int | Path) -> Job | None:
        """A job by id, by name, or by run directory (path or its name); AmbiguousName for a name jobs share."""
        text = str(reference).strip()
        if text.isdigit():
            found = self.job(int(text))
            if found:
                return found
        rows = self.connection.execute("SELECT * FROM jobs WHERE name = ? ORDER BY id", (text,)).fetchall()
        if len(rows) > 1:
            # Only a store from before names were unique (or a live edit to a taken name) holds such a name:
            # picking the newest acted on a job the user may not have meant.
            ids = [str(row["id"]) for row in rows]
            raise AmbiguousName(f"{text!r} names jobs {', '.join(ids[:-1])} and {ids[-1]}: give one of their ids")
        if rows:
            return _job(rows[0])
        return self._find_by_run_dir(text)

    def name_holder(self, name: str, other_than: int) -> int | None:
        """The id of a job other than other_than that holds name, or None."""
        row = self.connection.execute("SELECT id FROM jobs WHERE name = ? AND id != ? LIMIT 1",
                                      (name, int(other_than))).fetchone()
        return row["id"] if row else None

    def free_name(self, name: str) -> str:
        """name, or name-2, name-3…: the first that no job holds, so that a name finds one job."""
        candidate, number = name, 1
        while self.connection.execute("SELECT 1 FROM jobs WHERE name = ?", (candidate,)).fetchone():
            number += 1
            candidate = numbered_name(name, number)
        return candidate

    def _find_by_run_dir(self, text: str) -> Job | None:
        candidates = {text, text.rstrip("/")}
        try:
            candidates.add(str(Path(text).expanduser().resolve()))
        except OSError:
            pass
        for candidate in candidates:
            row = self.connection.execute("SELECT * FROM jobs WHERE run_dir = ? ORDER BY id DESC LIMIT 1",
                                          (candidate,)).fetchone()
            if row:
                return _job(row)
        basename = Path(text.rstrip("/")).name
        if basename:
            row = self.connection.execute(
                "SELECT * FROM jobs WHERE run_dir LIKE ? ESCAPE '\\' ORDER BY id DESC LIMIT 1",
                ("%/" + _escape_like(basename),)).fetchone()
            if row:
                return _job(row)
        return None

    def experiment_jobs(self, experiment: str) -> list[Job]:
        """The jobs of an experiment in submission order (none for "", the lone jobs' mark)."""
        rows = self.connection.execute("SELECT * FROM jobs WHERE experiment = ? AND experiment != '' ORDER BY id",
                                       (experiment,)).fetchall()
        return [_job(row) for row in rows]

    def events(self, job_id: int | None = None, limit: int = 100) -> list[Event]:
        """The newest limit events (of one job, or of all), oldest first."""
        if job_id is None:
            rows = self.connection.execute("SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,))
        else:
            rows = self.connection.execute("SELECT * FROM events WHERE job_id = ? ORDER BY id DESC LIMIT ?",
                                           (int(job_id), limit))
        return [event_from_row(dict(row)) for row in reversed(rows.fetchall())]

    def events_since(self, after_id: int, limit: int = 1000) -> list[Event]:
        """Events newer than after_id, oldest first (for incremental readers such as the TUI)."""
        rows = self.connection.execute("SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?",
                                       (after_id, limit)).fetchall()
        return [event_from_row(dict(row)) for row in rows]

    # ------------------------------------------------------------------ client writes

    def submit(self, *, name: str, spec_path: Path, run_dir: Path, algo: str = "", env: str = "",
               priority: int = 0, gpus_wanted: int = 0, total_steps: int = 0, max_restarts: int = 3,
               spec_seen: str | None = None, overrides: dict | None = None, experiment: str = "",
               cluster: str = "", gpu_memory_gb: float = 0.0, step: int = 0) -> Job:
        """Queue a job whose run directory is already prepared (one of an experiment's, when experiment is named);
        step is where it starts (a fork's parent checkpoint's)."""
        now = time.time()
        with self._write():
            cursor = self.connection.execute(
                "INSERT INTO jobs (name, spec_path, spec_seen, overrides, run_dir, algo, env, state, desired,"
                " priority, gpus_wanted, total_steps, max_restarts, submitted, updated, experiment, cluster,"
                " gpu_memory_gb, step) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, str(spec_path), spec_seen, json.dumps(overrides or {}), str(run_dir), algo, env,
                 State.QUEUED.value, Desired.RUNNING.value, priority, gpus_wanted, total_steps,
                 max_restarts, now, now, experiment, cluster, gpu_memory_gb, step))
            job_id = cursor.lastrowid
            self._event(job_id, EventKind.STATE, None, State.QUEUED, f"submitted {spec_path}", now)
        return self.job(job_id)

    def set_desired(self, job_id: int, desired: Desired) -> Job:
        """Record a client's intent (running / paused / killed); the daemon acts on it."""
        desired = Desired(desired)
        with self._write():
            self.connection.execute(
                "UPDATE jobs SET desired = ?, desired_seq = desired_seq + 1, updated = ? WHERE id = ?",
                (desired.value, time.time(), int(job_id)))
            self._event(job_id, EventKind.INTENT, None, None, desired.request, time.time())
        return self.job(job_id)

    # ------------------------------------------------------------------ daemon writes

    def transition(self, job_id: int, new_state: State, reason: str, **changes: Unpack[JobChanges]) -> Job:
        """Move a job to new_state (checked against the lifecycle), record the event, apply changes.

        Leaving the active states ends the job's process and signal; entering them gives it a process
        (the one in changes, else one with no GPUs and no pid yet) and no signal.
        """
        new_state = State(new_state)
        now = time.time()
        with self._write():
            current = self.job(job_id)
            if current is None:
                raise KeyError(job_id)
            jobstate.check(current.state, new_state)
            if new_state not in ACTIVE:
                changes.update(process=None, signal=None)
            elif current.state not in ACTIVE:
                changes.setdefault("process", Process())
                changes.setdefault("signal", None)
            self._update(job_id, {**change_columns(changes), "state": new_state.value, "reason": reason}, now)
            self._event(job_id, EventKind.STATE, current.state, new_state, reason, now)
        return self.job(job_id)

    def update(self, job_id: int, **changes: Unpack[JobChanges]) -> Job:
        """Change a job without a state change (caches, its worker, bookkeeping)."""
        with self._write():
            self._update(job_id, change_columns(changes), time.time())
        return self.job(job_id)

    def relocate(self, job_id: int, run_dir: Path, spec_path: tuple[Path, Path], message: str) -> Job:
        """Point a job at its run directory's new place (daemon/moves.py), with the event, in one transaction.

        spec_path is (old, new): every job following the old file follows the new one (an experiment's
        jobs all follow the copy in its first run).
        """
        with self._write():
            now = time.time()
            row = self.connection.execute("SELECT run_dir FROM jobs WHERE id = ?", (int(job_id),)).fetchone()
            self._update(job_id, {"run_dir": str(run_dir), "moved_from": row["run_dir"]}, now)
            self.connection.execute("UPDATE jobs SET spec_path = ?, updated = ? WHERE spec_path = ?",
                                    (str(spec_path[1]), now, str(spec_path[0])))
            self._event(job_id, EventKind.MOVED, None, None, message, now)
        return self.job(job_id)

    def forget_moved_from(self, job_id: int, kind: EventKind, message: str) -> None:
        """The old run of a move is deleted (or left alone), with the event that says so, in one transaction."""
        with self._write():
            now = time.time()
            self._update(job_id, {"moved_from": None}, now)
            self._event(job_id, kind, None, None, message, now)

    def add_event(self, job_id: int | None, kind: EventKind, message: str) -> None:
        with self._write():
            self._event(job_id, kind, None, None, message, time.time())

    def _update(self, job_id: int, columns: dict, now: float) -> None:
        columns = {key: _column_value(value) for key, value in columns.items()}
        columns["updated"] = now
        assignments = ", ".join(f"{key} = ?" for key in columns)
        self.connection.execute(f"UPDATE jobs SET {assignments} WHERE id = ?",
                                (*columns.values(), int(job_id)))

    def _event(self, job_id, kind, from_state, to_state, message, now) -> None:
        kind = EventKind(kind)  # a kind no reader knows is refused here, not stored
        self.connection.execute(
            "INSERT INTO events (time, job_id, kind, from_state, to_state, message) VALUES (?, ?, ?, ?, ?, ?)",
            (now, job_id, kind.value, _column_value(from_state), _column_value(to_state), message))

    # ------------------------------------------------------------------ hardware samples

    def add_hardware_sample(self, sample: dict, *, keep_s: float = 600.0) -> None:
        """Append one sample (a hardware.Sample as a dict) and drop those older than keep_s."""
        now = sample.get("time", time.time())
        with self._write():
            self.connection.execute("INSERT INTO hardware_samples (time, sample) VALUES (?, ?)",
                                    (now, json.dumps(sample, separators=(",", ":"))))
            self.connection.execute("DELETE FROM hardware_samples WHERE time < ?", (now - keep_s,))

    def hardware_samples(self, since: float = 0.0) -> list[dict]:
        rows = self.connection.execute("SELECT sample FROM hardware_samples WHERE time > ? ORDER BY time",
                                       (since,)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def latest_hardware_sample(self) -> dict | None:
        row = self.connection.execute(
            "SELECT sample FROM hardware_samples ORDER BY time DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row else None


def _statements(script: str) -> list[str]:
    return [statement.strip() for statement in script.split(";") if statement.strip()]


def _column_value(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return ",".join(str(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return value


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _job(row: sqlite3.Row) -> Job:
    return job_from_row(dict(row))
