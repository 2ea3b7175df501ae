"""The SQLite store: schema and migrations, permissions, intents, checked transitions, lookups."""
from __future__ import annotations

import sqlite3
import stat
import sys
import subprocess

import pytest

from rlsup.jobs import store as store_module
from rlsup import spec as specs
from rlsup.jobs.record import CHANGE_KEYS, EventKind, row_section, spec_columns
from rlsup.jobs.state import Desired, State, TransitionError
from rlsup.jobs.store import AmbiguousName, Process, SentSignal, SignalKind, Store, StoreError


@pytest.fixture
def home(tmp_path):
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def store(home):
    with Store(home) as opened:
        yield opened


def submit(store, name="cartpole", run_dir=None, **options):
    run_dir = run_dir or store.home / "runs" / f"{name}-1"
    return store.submit(name=name, spec_path=store.home / f"{name}.toml", run_dir=run_dir, algo="dqn",
                        env="CartPole-v1", total_steps=1000, **options)


def test_fresh_database_is_private_wal_and_at_the_current_version(store, home):
    assert store.schema_version() == store_module.SCHEMA_VERSION
    assert store.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert stat.S_IMODE((home / "rlsup.db").stat().st_mode) == 0o600


def test_reopening_keeps_data_and_does_not_migrate_twice(home):
    with Store(home) as first:
        job = submit(first)
    with Store(home) as second:
        assert second.job(job.id).name == "cartpole"
        assert second.schema_version() == store_module.SCHEMA_VERSION


def test_a_version_zero_file_is_migrated(home):
    sqlite3.connect(home / "rlsup.db").close()
    with Store(home) as opened:
        assert opened.schema_version() == store_module.SCHEMA_VERSION
        assert opened.jobs() == []


def test_a_newer_schema_is_refused(home):
    connection = sqlite3.connect(home / "rlsup.db")
    connection.execute(f"PRAGMA user_version = {store_module.SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(StoreError, match="upgrade rlsup"):
        Store(home)


def test_submit_queues_with_an_event(store):
    job = submit(store, priority=3)
    assert job.state is State.QUEUED and job.desired is Desired.RUNNING
    assert job.priority == 3 and job.total_steps == 1000 and job.algo == "dqn"
    events = store.events(job.id)
    assert [(event.kind, event.to_state) for event in events] == [("state", "queued")]


def test_jobs_come_in_submission_order_and_filter_by_state(store):
    first, second = submit(store, "a"), submit(store, "b")
    store.transition(second.id, State.STARTING, "placed")
    assert [job.id for job in store.jobs()] == [first.id, second.id]
    assert [job.id for job in store.jobs([State.STARTING])] == [second.id]


def test_intents_bump_a_sequence_the_daemon_settles(store):
    job = submit(store)
    assert job.new_intent  # the submission itself
    store.update(job.id, applied_seq=job.desired_seq)
    assert not store.job(job.id).new_intent
    paused = store.set_desired(job.id, Desired.PAUSED)
    assert paused.desired is Desired.PAUSED and paused.new_intent
    assert store.events(job.id)[-1].message == "pause requested"


def test_transitions_are_checked_and_recorded(store):
    job = submit(store)
    with pytest.raises(TransitionError):
        store.transition(job.id, State.RUNNING, "skipping starting")
    store.transition(job.id, State.STARTING, "placed", process=Process(gpus=(0, 2), pid=1234))
    running = store.transition(job.id, State.RUNNING, "reports")
    assert running.gpu_indices == (0, 2) and running.pid == 1234 and running.reason == "reports"
    last = store.events(job.id)[-1]
    assert (last.from_state, last.to_state, last.message) == ("starting", "running", "reports")


def test_a_process_and_a_signal_exist_only_while_the_job_is_active(store):
    job = submit(store)
    assert (job.process, job.signal, job.pid, job.gpus) == (None, None, None, "")
    starting = store.transition(job.id, State.STARTING, "placed")
    assert starting.process == Process() and starting.signal is None
    store.update(job.id, process=Process((1,), 4321, 1700.5, "boot-a"))
    pausing = store.transition(job.id, State.PAUSING, "pause requested", signal=SentSignal(SignalKind.PAUSE, 1800.0))
    assert pausing.process == Process((1,), 4321, 1700.5, "boot-a") and pausing.gpus == "1"
    assert pausing.signal == SentSignal(SignalKind.PAUSE, 1800.0) and pausing.signal.kind is SignalKind.PAUSE
    store.update(job.id, signal=SentSignal(SignalKind.PAUSE_KILL, 1800.0))
    assert store.job(job.id).signal.kind is SignalKind.PAUSE_KILL
    paused = store.transition(job.id, State.PAUSED, "paused with a checkpoint", exit_code=75)
    assert (paused.process, paused.signal, paused.exit_code) == (None, None, 75)
    row = store.connection.execute("SELECT gpus, pid, signal_sent FROM jobs WHERE id = ?", (job.id,)).fetchone()
    assert tuple(row) == ("", None, None)  # the columns are cleared, not only hidden
    again = store.transition(store.transition(job.id, State.QUEUED, "resume requested").id, State.STARTING, "placed")
    assert again.process == Process() and again.signal is None


def test_update_refuses_state_and_unknown_columns(store):
    job = submit(store)
    with pytest.raises(ValueError):
        store.update(job.id, state="done")
    with pytest.raises(ValueError):
        store.update(job.id, colour="blue")


def test_find_job_by_id_name_and_run_directory(store, tmp_path):
    run_dir = tmp_path / "runs" / "pong_x-20260101-000000-abcd"
    first = submit(store, "pong_x", run_dir=run_dir)
    newer = submit(store, "pong_x", run_dir=tmp_path / "runs" / "pong_x-2")
    assert store.find_job(str(first.id)).id == first.id
    assert store.find_job(first.id).id == first.id
    # A name two jobs share (a store from before names were unique) is refused, naming both: the newest was
    # picked silently, and may not be the job meant (issue 24 item 10).
    with pytest.raises(AmbiguousName, match=f"'pong_x' names jobs {first.id} and {newer.id}: give one of their ids"):
        store.find_job("pong_x")
    assert store.find_job(str(run_dir)).id == first.id
    assert store.find_job(str(run_dir) + "/").id == first.id
    assert store.find_job(run_dir.name).id == first.id
    assert store.find_job("pong%") is None  # LIKE wildcards are matched literally
    assert store.find_job("999") is None


def test_a_numeric_name_still_resolves(store):
    job = submit(store, "2048")
    assert store.find_job("2048").id == job.id


def test_events_are_limited_to_the_newest_oldest_first(store):
    job = submit(store)
    for number in range(5):
        store.add_event(job.id, "edit", f"edit {number}")
    messages = [event.message for event in store.events(job.id, limit=3)]
    assert messages == ["edit 2", "edit 3", "edit 4"]
    everything = store.events_since(0)
    assert [event.id for event in everything] == sorted(event.id for event in everything)


# Every kind an event was ever stored with, as the store holds it: a store of any version reads.
STORED_KINDS = ("state", "intent", "edit", "refused", "signal", "daemon", "adopted", "waiting", "checkpoint",
                "feature off", "moving", "moved", "deleted", "kept", "decision")


def test_event_kinds_are_one_enum_whose_values_are_the_stored_strings(store):
    job = submit(store)
    for kind in STORED_KINDS:  # as an older rlsup wrote them, straight into the table
        store.connection.execute("INSERT INTO events (time, job_id, kind, message) VALUES (1.0, ?, ?, '')",
                                 (job.id, kind))
    kinds = [event.kind for event in store.events(job.id)][1:]
    assert kinds == [EventKind(kind) for kind in STORED_KINDS] and len(EventKind) == len(STORED_KINDS)
    assert all(type(kind) is EventKind for kind in kinds)
    with pytest.raises(ValueError):
        store.add_event(job.id, "edited", "a kind no reader knows is refused, not stored")
    schema_comment = store_module.MIGRATIONS[0].split("kind TEXT NOT NULL,")[1].split("from_state")[0]
    assert all(kind in schema_comment for kind in STORED_KINDS), schema_comment


def test_the_row_mirrors_its_spec_through_one_function(store):
    """submit and every accepted edit write the row's copy of job.toml by spec_columns; a row read back gives
    the [job] section it copies (the daemon's fallback when job.toml does not read)."""
    spec = specs.loads('[job]\nname = "mirror"\nalgo = "vtrace"\npriority = 4\ntotal_steps = 7000\n'
                       'max_restarts = 1\ngpu_memory_gb = 2.5\n[env]\nid = "Acrobot-v1"\n', file="mirror.toml")
    columns = spec_columns(spec)
    assert set(columns) == {"name", "algo", "env", "priority", "gpus_wanted", "total_steps", "max_restarts",
                            "cluster", "gpu_memory_gb"} <= CHANGE_KEYS
    job = store.submit(**columns, spec_path=store.home / "mirror.toml", run_dir=store.home / "runs" / "mirror-1")
    assert (job.name, job.algo, job.env, job.priority, job.total_steps, job.max_restarts, job.gpu_memory_gb) == \
        ("mirror", "vtrace", "Acrobot-v1", 4, 7000, 1, 2.5)
    section = row_section(job)
    assert (section.total_steps, section.max_restarts, section.priority, section.name) == (7000, 1, 4, "mirror")
    edited = spec.replace("job", total_steps=9000, priority=-2)
    assert store.update(job.id, **spec_columns(edited)).total_steps == 9000 == row_section(store.job(job.id)).total_steps


def test_data_version_moves_only_for_other_connections(home):
    with Store(home) as daemon, Store(home) as client:
        before = daemon.data_version()
        submit(daemon)
        assert daemon.data_version() == before
        submit(client, "other")
        assert daemon.data_version() != before


def test_hardware_samples_are_kept_for_a_window(store):
    store.add_hardware_sample({"time": 100.0, "cpu_percent": [1.0]})
    store.add_hardware_sample({"time": 800.0, "cpu_percent": [2.0]}, keep_s=600.0)
    assert [sample["time"] for sample in store.hardware_samples()] == [800.0]
    assert store.latest_hardware_sample()["cpu_percent"] == [2.0]


def test_the_store_imports_no_heavy_module():
    code = ("import sys, rlsup.jobs.store, rlsup.jobs.state, rlsup.hardware;"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'gymnasium', 'textual')))")
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


LOCK_PROBE = """
import fcntl, sys
with open(sys.argv[1], "r+b") as handle:
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("free")
    except OSError:
        print("held")
"""


def test_opening_a_second_store_keeps_the_first_ones_lock(home):
    """Closing any descriptor of rlsup.db would drop this process's SQLite locks; a daemon closing its
    connection would then take itself for the last one and delete the WAL under our feet."""
    with Store(home) as first:
        first.jobs()
        Store(home).close()
        probe = subprocess.run([sys.executable, "-c", LOCK_PROBE, str(home / "rlsup.db")], capture_output=True,
                               text=True, check=True)
        assert probe.stdout.strip() == "held"


def test_rows_written_by_an_older_rlsup_read_as_typed_records(home):
    """The schema is unchanged: an old database's flat columns become the sub-records on reading."""
    with Store(home) as first:
        active, resting = submit(first), submit(first, "other")
    connection = sqlite3.connect(home / "rlsup.db")
    connection.execute("UPDATE jobs SET state = 'pausing', gpus = '0,1', pid = 77, process_start = 5.0,"
                       " boot_id = 'b', signal_sent = 'pause-kill', signal_time = 9.0 WHERE id = ?", (active.id,))
    connection.execute("UPDATE jobs SET state = 'paused', pid = 78 WHERE id = ?", (resting.id,))
    connection.commit()
    connection.close()
    with Store(home) as reopened:
        pausing = reopened.job(active.id)
        assert pausing.process == Process((0, 1), 77, 5.0, "b")
        assert pausing.signal == SentSignal(SignalKind.PAUSE_KILL, 9.0)
        assert reopened.job(resting.id).process is None  # a stale pid of a resting job is no process


def test_a_fresh_store_waits_for_a_writer_before_turning_to_wal(home):
    """SQLite answers a switch to WAL that meets another connection's lock with SQLITE_BUSY at once, without its
    busy handler: twelve clients making one home's store at once had some fail in 2 ms with "busy for 10 s"
    (a CI run of test_concurrent_submits). A writer that lets go within the timeout is waited for."""
    import threading
    import time

    sqlite3.connect(home / "rlsup.db").close()
    writer = sqlite3.connect(home / "rlsup.db", isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # the rollback journal's reserved lock, as a client's switch or migration holds it
    writer.execute("CREATE TABLE held (x)")
    threading.Timer(0.3, lambda: writer.execute("ROLLBACK")).start()
    began = time.monotonic()
    with Store(home, timeout_s=5) as opened:
        assert opened.connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert time.monotonic() - began >= 0.2
    writer.close()
