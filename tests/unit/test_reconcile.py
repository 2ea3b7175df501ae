"""The daemon's reconcile loop in-process: a real store, fake hardware and workers the test drives.

Each test interleaves client intents, edits and worker reports/exits tick by tick, and checks the
states, signals and events the store ends with; the real-process versions live in tests/integration/.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from rlsup.run import files as runfiles
from rlsup import client
from rlsup.daemon.main import Daemon
from rlsup.daemon.runner import JobRunner, Signal
from rlsup.daemon.scheduler import Settings
from rlsup.formatting import GIB
from rlsup.hardware import FakeHardware
from rlsup.run.exit import EXIT_DONE, EXIT_ERROR, EXIT_PAUSED
from rlsup.jobs.state import Desired, Exit, State
from rlsup.jobs.store import Job, SignalKind, Store
from rlsup_testing import cartpole_text

from fake_runner import SIGKILL, FakeRunner


class Loop:
    """A Daemon on the test's home, ticked by hand; clients write through a store of their own."""

    def __init__(self, home: Path, jobs_directory: Path, **settings):
        self.home, self.jobs_directory = home, jobs_directory
        values = dict(cpu_jobs=2, restart_backoff_s=0.0, debounce_s=0.0, hardware_sample_s=0.0, **settings)
        self.settings = Settings(**values)
        self.runner = FakeRunner()
        self.daemon = self.new_daemon(self.runner)
        self.client = Store(home)

    def new_daemon(self, runner: JobRunner) -> Daemon:
        return Daemon(self.home, self.settings, machine=FakeHardware(gpus=2), runner=runner)

    def tick(self, times: int = 1) -> None:
        for _ in range(times):
            # Every part of the loop runs on every tick: no test waits on the loop's own timers.
            self.daemon.last_reconcile = self.daemon.last_status = float("-inf")
            self.daemon.tick()

    def submit(self, name: str = "cartpole", **fields) -> Job:
        path = self.jobs_directory / f"{name}.toml"
        path.write_text(cartpole_text(**fields))
        return client.submit(path, home=self.home, start_daemon=False)

    def save(self, job: Job, *, threads: int = 1, **fields) -> None:
        """An edit of the job's file, as the watcher reports it once settled (threads: a resume field)."""
        Path(job.spec_path).write_text(cartpole_text(**fields).replace("threads = 1", f"threads = {threads}"))
        self.daemon.watcher.touched(job.spec_path)

    def want(self, job: Job, desired: Desired) -> None:
        self.client.set_desired(job.id, desired)

    def job(self, job: Job) -> Job:
        return self.daemon.store.job(job.id)

    def state(self, job: Job) -> State:
        return self.job(job).state

    def transitions(self, job: Job) -> list[tuple[str | None, str | None]]:
        return [(event.from_state, event.to_state) for event in self.daemon.store.events(job.id, 1000)
                if event.kind == "state"]

    def messages(self, job: Job, kind: str) -> list[str]:
        return [event.message for event in self.daemon.store.events(job.id, 1000) if event.kind == kind]

    def close(self) -> None:
        self.client.close()
        self.daemon.store.close()


@pytest.fixture
def loop(rlsup_home: Path, tmp_path: Path) -> Loop:
    jobs_directory = tmp_path / "jobs"
    jobs_directory.mkdir()
    made = Loop(rlsup_home, jobs_directory)
    yield made
    made.close()


def started(loop: Loop, **fields) -> Job:
    """A job whose worker reports: running."""
    job = loop.submit(**fields)
    loop.tick()
    loop.runner.report(job.id, 10, fields.get("total_steps", 2_000))
    loop.tick()
    assert loop.state(job) is State.RUNNING
    return job


# ---------------------------------------------------------------------------------------------
# A job's straight path


def test_a_job_starts_runs_stops_at_its_budget_and_is_done(loop):
    job = loop.submit(total_steps=500)
    loop.tick()
    starting = loop.job(job)
    assert starting.state is State.STARTING and starting.pid == loop.runner.handle(job.id).pid
    assert starting.process.boot_id == FakeRunner.boot_id and loop.runner.gpus[job.id] == ()
    loop.runner.report(job.id, 200, 500)
    loop.tick()
    assert (loop.state(job), loop.job(job).step) == (State.RUNNING, 200)
    # A status.json at the budget is a claim (issue 49 item 9): the job runs until its worker ends itself.
    loop.runner.report(job.id, 500, 500)
    loop.tick()
    assert (loop.state(job), loop.job(job).step) == (State.RUNNING, 500)
    loop.runner.end(job.id, EXIT_DONE, step=500)
    loop.tick()
    done = loop.job(job)
    assert (done.state, done.step, done.pid, done.gpus, done.exit_code) == (State.DONE, 500, None, "", 0)
    assert loop.transitions(job) == [(None, "queued"), ("queued", "starting"), ("starting", "running"),
                                     ("running", "done")]


def test_a_worker_that_cannot_start_fails_the_job(loop, monkeypatch):
    def refuse(*arguments):
        raise OSError("no such file: python")
    monkeypatch.setattr(loop.runner, "start", refuse)
    job = loop.submit()
    loop.tick()
    failed = loop.job(job)
    assert failed.state is State.FAILED and "cannot start the worker: no such file" in failed.reason


# ---------------------------------------------------------------------------------------------
# Intents that meet a job in any state


def test_kill_while_queued_never_starts_a_worker(loop):
    loop.daemon.settings = Settings(cpu_jobs=0, hardware_sample_s=0.0)  # nothing may start
    job = loop.submit()
    loop.tick()
    assert loop.state(job) is State.QUEUED and "CPU slot" in loop.job(job).reason
    loop.want(job, Desired.KILLED)
    loop.tick()
    assert loop.state(job) is State.KILLED and loop.runner.signals == [] and loop.runner.handles() == []
    loop.daemon.settings = loop.settings
    loop.tick(2)
    assert loop.state(job) is State.KILLED  # a killed job stays killed until a resume


def test_a_pause_during_starting_pauses_then_resume_starts_again(loop):
    job = loop.submit()
    loop.tick()
    assert loop.state(job) is State.STARTING
    loop.want(job, Desired.PAUSED)
    loop.tick()
    assert loop.state(job) is State.PAUSING and loop.runner.sent(job.id) == [Signal.PAUSE]
    assert loop.job(job).signal.kind is SignalKind.PAUSE
    loop.tick(2)
    assert loop.runner.sent(job.id) == [Signal.PAUSE]  # sent once, not on every tick
    loop.runner.end(job.id, EXIT_PAUSED, step=0)
    loop.tick()
    paused = loop.job(job)
    assert (paused.state, paused.signal, paused.process) == (State.PAUSED, None, None)
    loop.want(job, Desired.RUNNING)
    loop.tick(2)
    assert loop.state(job) is State.STARTING and loop.job(job).pid == loop.runner.handle(job.id).pid


def test_kill_of_a_running_job_kills_its_worker_once(loop):
    job = started(loop)
    loop.want(job, Desired.KILLED)
    loop.tick()
    assert loop.job(job).signal.kind is SignalKind.KILL and loop.runner.sent(job.id) == [Signal.KILL]
    loop.tick()
    killed = loop.job(job)
    assert (killed.state, killed.pid, killed.exit_code) == (State.KILLED, None, -SIGKILL)
    assert loop.runner.sent(job.id) == [Signal.KILL]


def test_a_pause_that_overruns_its_grace_is_killed_and_resumes_from_the_previous_checkpoint(loop):
    job = started(loop, stop_grace_s=0.0)
    loop.want(job, Desired.PAUSED)
    loop.tick()
    assert loop.state(job) is State.PAUSING
    time.sleep(0.01)  # past a grace of 0 s
    loop.tick()
    assert loop.runner.sent(job.id) == [Signal.PAUSE, Signal.KILL] and loop.job(job).signal.kind is SignalKind.PAUSE_KILL
    loop.tick()
    paused = loop.job(job)
    assert paused.state is State.PAUSED and "stopped before its pause checkpoint" in paused.reason


def test_budget_reached_while_a_pause_is_pending_ends_done(loop):
    job = started(loop, total_steps=1_000)
    loop.want(job, Desired.PAUSED)
    loop.tick()
    assert loop.state(job) is State.PAUSING
    loop.runner.report(job.id, 1_000, 1_000)  # the step in flight reached the budget
    loop.tick()
    assert loop.state(job) is State.PAUSING
    loop.runner.end(job.id, EXIT_DONE, step=1_000)
    loop.tick()
    done = loop.job(job)
    assert (done.state, done.step) == (State.DONE, 1_000) and "budget reached at step 1000" in done.reason


def test_a_pause_requested_while_stopping_is_carried_to_the_worker(loop):
    job = started(loop, total_steps=1_000)
    # No daemon moves a job to stopping now (issue 49 item 9), but a store an earlier one wrote may hold one.
    loop.daemon.store.transition(job.id, State.STOPPING, "budget reached at step 1000")
    loop.want(job, Desired.PAUSED)
    loop.tick()
    assert loop.state(job) is State.PAUSING and loop.runner.sent(job.id) == [Signal.PAUSE]
    loop.runner.end(job.id, EXIT_DONE, step=1_000)  # it finished its final checkpoint first
    loop.tick()
    assert loop.state(job) is State.DONE


def test_a_gpu_memory_figure_no_gpu_holds_is_not_kept_nor_placed_by(loop):
    """issue 49 item 8: status.json's figure is a claim; one larger than the job's GPU (16 GiB here) is not kept,
    and one kept before this check is taken as unmeasured, then replaced by the resumed worker's report."""
    job = loop.submit(gpus=1)
    loop.tick()
    loop.runner.report(job.id, 10, gpu_memory={"reserved_peak_bytes": 3 * GIB})
    loop.tick()
    for forged in (2 ** 59, 17 * GIB):
        loop.runner.report(job.id, 20, gpu_memory={"reserved_peak_bytes": 2 * GIB, "process_bytes": forged})
        loop.tick()
        assert loop.job(job).gpu_memory_bytes == 3 * GIB
    loop.want(job, Desired.PAUSED)
    loop.tick()
    loop.runner.end(job.id, EXIT_PAUSED, step=20)
    loop.tick()
    loop.daemon.store.update(job.id, gpu_memory_bytes=2 ** 59)
    loop.want(job, Desired.RUNNING)
    loop.tick(2)
    assert loop.state(job) is State.STARTING and loop.runner.gpus[job.id] == (0,), loop.job(job).reason
    loop.runner.report(job.id, 30, gpu_memory={"reserved_peak_bytes": 2 * GIB})
    loop.tick()
    assert loop.job(job).gpu_memory_bytes == 2 * GIB


# ---------------------------------------------------------------------------------------------
# Crashes and restarts


def test_a_crash_during_resume_restarts_with_backoff_until_the_budget_of_restarts_is_spent(loop):
    loop.daemon.settings = Settings(cpu_jobs=2, restart_backoff_s=30.0, hardware_sample_s=0.0, debounce_s=0.0)
    job = started(loop, max_restarts=1)
    loop.want(job, Desired.PAUSED)
    loop.tick()
    loop.runner.end(job.id, EXIT_PAUSED, step=10)
    loop.tick()
    loop.want(job, Desired.RUNNING)
    loop.tick(2)
    assert loop.state(job) is State.STARTING  # resumed
    loop.runner.end(job.id, EXIT_ERROR)
    loop.tick()
    queued = loop.job(job)
    assert (queued.state, queued.restarts) == (State.QUEUED, 1) and "restart 1 of 1" in queued.reason
    assert 25 < queued.not_before - time.time() <= 30
    loop.tick(3)
    assert loop.state(job) is State.QUEUED  # the backoff holds it
    assert not any("backoff" in message for message in loop.messages(job, "waiting"))
    loop.daemon.store.update(job.id, not_before=0.0)  # the backoff has passed
    loop.tick()
    assert loop.state(job) is State.STARTING
    loop.runner.end(job.id, EXIT_ERROR)
    loop.tick()
    failed = loop.job(job)
    assert failed.state is State.FAILED and "no restarts left (max_restarts = 1)" in failed.reason
    assert "last lines of worker.log" in failed.reason and "the fake worker broke" in failed.reason


def test_restart_backoff_doubles_with_each_restart(loop):
    loop.daemon.settings = Settings(cpu_jobs=2, restart_backoff_s=10.0, hardware_sample_s=0.0, debounce_s=0.0)
    job = started(loop, max_restarts=3)
    waits = []
    for _ in range(2):
        loop.runner.end(job.id, EXIT_ERROR)
        loop.tick()
        waits.append(loop.job(job).not_before - time.time())
        loop.daemon.store.update(job.id, not_before=0.0)
        loop.tick()
    assert 8 < waits[0] <= 10 and 18 < waits[1] <= 20 and loop.job(job).restarts == 2


def test_a_spec_error_exit_is_never_retried(loop):
    job = started(loop, max_restarts=3)
    loop.runner.end(job.id, 2, reason="job.toml: broken")
    loop.tick(2)
    failed = loop.job(job)
    assert (failed.state, failed.restarts) == (State.FAILED, 0) and "never retried" in failed.reason


# ---------------------------------------------------------------------------------------------
# Edits meeting a job in each state


def test_a_live_edit_of_a_running_job_reloads_its_worker(loop):
    job = started(loop, total_steps=2_000)
    loop.save(job, total_steps=3_000)
    loop.tick()
    assert loop.runner.sent(job.id) == [Signal.RELOAD]
    assert runfiles.read_run_spec(Path(job.run_dir)).job.total_steps == 3_000
    loop.runner.report(job.id, 20, 3_000)  # the worker applied it
    loop.tick()
    assert (loop.state(job), loop.job(job).total_steps) == (State.RUNNING, 3_000)
    assert any("job.total_steps: 2000 -> 3000" in message for message in loop.messages(job, "edit"))


def test_a_live_edit_during_starting_waits_for_the_first_report(loop):
    job = loop.submit(total_steps=2_000)
    loop.tick()
    loop.save(job, total_steps=3_000)
    loop.tick()
    assert loop.state(job) is State.STARTING and loop.runner.sent(job.id) == []  # no handler yet
    loop.runner.report(job.id, 0, 2_000)
    loop.tick()
    assert loop.state(job) is State.RUNNING and loop.runner.sent(job.id) == [Signal.RELOAD]


def test_an_edit_during_pausing_waits_for_the_next_start(loop):
    job = started(loop, total_steps=2_000)
    loop.want(job, Desired.PAUSED)
    loop.tick()
    loop.save(job, total_steps=5_000, threads=2)
    loop.tick()
    assert loop.state(job) is State.PAUSING and loop.runner.sent(job.id) == [Signal.PAUSE]
    assert runfiles.read_run_spec(Path(job.run_dir)).job.threads == 2
    loop.runner.end(job.id, EXIT_PAUSED, step=40)
    loop.tick()
    paused = loop.job(job)
    assert (paused.state, paused.total_steps, paused.step) == (State.PAUSED, 5_000, 40)


def test_a_resume_field_edit_pauses_and_resumes_the_running_job(loop):
    job = started(loop)
    loop.save(job, threads=2)
    loop.tick()
    pausing = loop.job(job)
    assert pausing.state is State.PAUSING and "edit of job.threads applies by pause and resume" in pausing.reason
    loop.runner.end(job.id, EXIT_PAUSED, step=20)
    loop.tick()  # re-queued and, the slot being free, started again in the same round
    assert loop.transitions(job)[-2:] == [("pausing", "queued"), ("queued", "starting")]
    assert loop.job(job).desired is Desired.RUNNING and loop.runner.handle(job.id) is not None
    assert "paused with a checkpoint; resuming" in loop.messages(job, "state")[-2]


def test_an_identity_edit_is_refused_with_its_line_and_the_job_goes_on(loop):
    job = started(loop, seed=7)
    loop.save(job, seed=8)
    loop.tick()
    assert loop.state(job) is State.RUNNING and loop.runner.sent(job.id) == []
    refusal = loop.messages(job, "refused")[-1]
    assert f"{job.spec_path}:3: job.seed: 7 -> 8" in refusal and "start a new run" in refusal
    assert runfiles.read_run_spec(Path(job.run_dir)).job.seed == 7


def test_a_queued_job_that_never_started_takes_an_identity_edit(loop):
    loop.daemon.settings = Settings(cpu_jobs=0, hardware_sample_s=0.0, debounce_s=0.0)
    job = loop.submit(seed=7)
    loop.tick()
    loop.save(job, seed=8)
    loop.tick()
    assert runfiles.read_run_spec(Path(job.run_dir)).job.seed == 8 and loop.messages(job, "refused") == []


def test_raising_the_budget_of_a_done_job_runs_it_on(loop):
    job = started(loop, total_steps=500)
    loop.runner.end(job.id, EXIT_DONE, step=500)
    loop.tick()
    assert loop.state(job) is State.DONE
    loop.save(job, total_steps=800)
    loop.tick()
    assert "total_steps raised to 800 (done at step 500)" in loop.messages(job, "state")[-2]
    assert loop.state(job) is State.STARTING


def test_a_crash_while_an_edit_restart_is_pending_counts_as_the_pause(loop):
    job = started(loop)
    loop.save(job, threads=2)
    loop.tick()
    assert loop.state(job) is State.PAUSING
    loop.runner.end(job.id, EXIT_ERROR)  # died of something else before its checkpoint
    loop.tick()
    assert loop.transitions(job)[-2:] == [("pausing", "queued"), ("queued", "starting")]
    assert loop.job(job).restarts == 0 and "resumes from the previous one; resuming" in loop.messages(job, "state")[-2]


# ---------------------------------------------------------------------------------------------
# A daemon restart


def test_a_new_daemon_adopts_live_workers_and_settles_those_that_ended(loop):
    alive, ended = started(loop, name="alive"), started(loop, name="ended")
    alive_pid, ended_pid = loop.job(alive).pid, loop.job(ended).pid
    loop.daemon.store.close()
    survivors = FakeRunner(survivors={alive_pid})
    survivors.lost_exits[ended_pid] = Exit(code=EXIT_DONE, step=2_000)
    loop.daemon = loop.new_daemon(survivors)
    loop.runner = survivors
    loop.daemon.recover()
    assert loop.state(alive) is State.RUNNING and survivors.handle(alive.id).pid == alive_pid
    assert any(f"adopted running worker pid {alive_pid}" in message for message in loop.messages(alive, "adopted"))
    assert (loop.state(ended), loop.job(ended).step) == (State.DONE, 2_000)
    loop.want(alive, Desired.KILLED)
    loop.tick(2)
    assert loop.state(alive) is State.KILLED and survivors.sent(alive.id) == [Signal.KILL]
