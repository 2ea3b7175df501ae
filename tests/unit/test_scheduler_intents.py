"""A user's intent wins over an experiment's scheduler: a member killed, or paused by its user, is never resumed by a
decision, however the two interleave (issue 49 item 4). A real store; the daemon in-process with workers the test
ends (tests/unit/fake_runner.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlsup import client
from rlsup.daemon import deciding, pbt_generations
from rlsup.daemon.main import Daemon
from rlsup.daemon.scheduler import Settings
from rlsup.hardware import FakeHardware
from rlsup.jobs import standings
from rlsup.jobs.state import Desired, State
from rlsup.jobs.store import Job, Store
from rlsup.run.exit import EXIT_HELD, ExitRecord, read_exit, write_exit
from rlsup.run.holds import Standing
from rlsup_testing import cartpole_text

from fake_runner import FakeRunner

RUNG = 600
ASHA = f'\n[scheduler]\nkind = "asha"\nmetric = "eval_return"\nrungs = [{RUNG}, 1_200]\nkeep = 0.5\n'


def waiting_member(store: Store, run_dir: Path) -> Job:
    """A member paused at its rung by its worker (exit 77), as the daemon's finish leaves it."""
    run_dir.mkdir()
    job = store.submit(name=run_dir.name, spec_path=run_dir / "job.toml", run_dir=run_dir, experiment="e",
                       total_steps=1_800)
    return store.transition(job.id, State.PAUSED, f"reached rung 1 of ASHA at step {RUNG}; waits for the "
                            "scheduler's decision", step=RUNG, desired=Desired.PAUSED)


def promote(store: Store, job: Job) -> Job:
    decision = standings.Decision(job.id, RUNG, standings.PROMOTED, "promoted by ASHA at rung 1: it ranks 1 of 2",
                                  time.time())
    assert standings.record_decision(store, decision, resume=True)
    return store.job(job.id)


@pytest.mark.parametrize("intents, resumed", [
    ((), True),                                     # the scheduler's own pause: the decision resumes it
    ((Desired.KILLED,), False),                     # `rlsup kill`: it stays where it is, and is killed next
    ((Desired.PAUSED,), False),                     # a pause the user asked for as it reached its rung
    ((Desired.PAUSED, Desired.RUNNING), True),      # a pause taken back: the user wants it to run
    ((Desired.KILLED, Desired.RUNNING), True),
])
def test_a_decision_resumes_a_waiting_member_only_when_its_user_asked_neither_kill_nor_pause(
        rlsup_home: Path, tmp_path: Path, intents: tuple, resumed: bool) -> None:
    """issue 49 item 4: record_decision queued a member its user had killed, with desired = running."""
    with Store(rlsup_home) as store:
        job = waiting_member(store, tmp_path / "member")
        for intent in intents:
            store.set_desired(job.id, intent)
        decided = promote(store, job)
        wanted = intents[-1] if intents else Desired.PAUSED
        assert (decided.state, decided.desired) == ((State.QUEUED, Desired.RUNNING) if resumed
                                                    else (State.PAUSED, wanted)), decided
        # The decision itself stands (it is the scheduler's to record), with its event, once.
        assert [d.verdict for d in standings.decisions(store, [job.id])] == [standings.PROMOTED]
        if not resumed:
            assert decided.reason.startswith("promoted by ASHA at rung 1") and f"{wanted.verb} requested" in \
                decided.reason, decided.reason


def test_a_pause_asked_before_a_decision_it_was_taken_at_does_not_hold_the_next_one(rlsup_home: Path,
                                                                                   tmp_path: Path) -> None:
    """A user's pause counts against the decisions after it, not forever: once a decision has honoured it and
    the user resumed, the next rung's decision resumes the member again."""
    with Store(rlsup_home) as store:
        job = waiting_member(store, tmp_path / "member")
        store.set_desired(job.id, Desired.PAUSED)
        assert promote(store, job).state is State.PAUSED
        store.set_desired(job.id, Desired.RUNNING)
        store.transition(job.id, State.QUEUED, "resume requested", desired=Desired.RUNNING)
        store.transition(job.id, State.STARTING, "started")
        store.transition(job.id, State.PAUSED, "reached rung 2 of ASHA at step 1200", step=1_200,
                         desired=Desired.PAUSED)
        decision = standings.Decision(job.id, 1_200, standings.PROMOTED, "promoted by ASHA at rung 2", time.time())
        standings.record_decision(store, decision, resume=True)
        assert store.job(job.id).state is State.QUEUED


# ---------------------------------------------------------------------------------------------
# The daemon's loop, in-process


class Loop:
    """A Daemon on the test's home, ticked by hand, whose workers end when the test says."""

    def __init__(self, home: Path, jobs_directory: Path, scheduler: str = ASHA, total_steps: int = 1_800):
        self.home, self.runner = home, FakeRunner()
        settings = Settings(cpu_jobs=2, restart_backoff_s=0.0, debounce_s=0.0, hardware_sample_s=0.0)
        self.daemon = Daemon(home, settings, machine=FakeHardware(gpus=0), runner=self.runner)
        self.client = Store(home)
        path = jobs_directory / "experiment.toml"
        path.write_text(cartpole_text(total_steps=total_steps, checkpoint_every=0) + scheduler)
        self.members = client.submit_experiment(path, seeds=(1, 2), experiment="e", home=home, start_daemon=False)

    def tick(self) -> None:
        self.daemon.last_reconcile = self.daemon.last_status = float("-inf")
        self.daemon.tick()

    def held(self, job: Job, value: float) -> None:
        """The worker paused at rung 1 with its evaluation there, as a real one writes exit.json."""
        write_exit(Path(job.run_dir), ExitRecord(code=EXIT_HELD, reason=f"reached rung 1 of ASHA at step {RUNG}",
                                                 step=RUNG, standing=Standing(RUNG, {"eval_return": value})))
        self.runner.end(job.id, EXIT_HELD, step=RUNG, reason=f"reached rung 1 of ASHA at step {RUNG}")

    def trained_to_hold(self, job: Job) -> None:
        """A real worker trains the member to its hold, pauses there with a checkpoint and writes exit.json."""
        environment = {**os.environ, "RLSUP_HOME": str(self.home)}
        ended = subprocess.run([sys.executable, "-m", "rlsup.worker", job.run_dir], env=environment,
                               capture_output=True, text=True, timeout=120)
        assert ended.returncode == EXIT_HELD, ended.stderr
        record = read_exit(Path(job.run_dir))
        self.runner.end(job.id, EXIT_HELD, step=record.step, reason=record.reason)

    def job(self, job: Job) -> Job:
        return self.client.job(job.id)

    def close(self) -> None:
        self.client.close()
        self.daemon.store.close()


@pytest.fixture
def loop(rlsup_home: Path, tmp_path: Path):
    jobs_directory = tmp_path / "jobs"
    jobs_directory.mkdir()
    made = Loop(rlsup_home, jobs_directory)
    yield made
    made.close()


def test_a_kill_that_lands_while_the_daemon_decides_is_not_overwritten(loop: Loop, monkeypatch) -> None:
    """issue 49 item 4, the attack: `rlsup kill` said "kill requested" as the rung was decided, and the member
    trained on to its end. Here the kill commits after the loop read the jobs, before it decides."""
    best, other = loop.members
    loop.tick()
    assert {loop.job(member).state for member in loop.members} == {State.STARTING}
    decide, kills = deciding.decide, []

    def killed_meanwhile(store: Store) -> None:
        if not kills and standings.standings(store, [best.id])[best.id]:  # once, as the rung is decided
            kills.append(client.set_intent(str(best.id), Desired.KILLED, home=loop.home, start_daemon=False))
        decide(store)

    monkeypatch.setattr(deciding, "decide", killed_meanwhile)
    loop.held(best, 100.0)
    loop.held(other, 5.0)
    loop.tick()
    assert [decision.verdict for decision in standings.decisions(loop.client, [best.id])] == [standings.PROMOTED]
    for _ in range(3):
        loop.tick()
    killed = loop.job(best)
    assert kills and killed.state is State.KILLED, (killed.state, killed.reason)
    assert [event.to_state for event in loop.client.events(best.id) if event.kind == "state"][-2:] == [
        "paused", "killed"]  # never started again


def test_a_pause_asked_as_the_worker_reached_its_rung_holds_after_the_promotion(loop: Loop) -> None:
    """issue 49 item 4: a user's pause reached the worker just as it paused at its rung (exit 77, not 75); the
    promotion then queued it again, against the pause."""
    best, other = loop.members
    loop.tick()
    loop.runner.report(best.id, 550, 1_800)
    loop.tick()
    client.set_intent(str(best.id), Desired.PAUSED, home=loop.home, start_daemon=False)
    loop.tick()
    assert loop.job(best).state is State.PAUSING
    loop.held(best, 100.0)
    loop.held(other, 5.0)
    loop.tick()
    loop.tick()
    paused = loop.job(best)
    assert [decision.verdict for decision in standings.decisions(loop.client, [best.id])] == [standings.PROMOTED]
    assert (paused.state, paused.desired) == (State.PAUSED, Desired.PAUSED), (paused.state, paused.reason)
    assert loop.runner.handle(best.id) is None
    client.set_intent(str(best.id), Desired.RUNNING, home=loop.home, start_daemon=False)  # not refused: not waiting
    loop.tick()
    assert loop.job(best).state is State.STARTING


PBT = ('\n[scheduler]\nkind = "pbt"\nmetric = "return"\ninterval = 300\nquantile = 0.5\n'
       'perturb = { "dqn.lr" = [0.8, 1.25] }\n')


def test_a_pbt_member_killed_while_its_generation_is_made_is_not_replaced_and_the_generation_is_taken_again(
        rlsup_home: Path, tmp_path: Path, monkeypatch) -> None:
    """issue 49 item 4, PBT's part: a kill that commits while the generation's forks are made. The generation
    does not commit a fork for a member its user killed meanwhile (nor resume one): it is taken again without
    it, as it would have been had the kill come first, and the fork made for it is deleted."""
    jobs_directory = tmp_path / "jobs"
    jobs_directory.mkdir()
    loop = Loop(rlsup_home, jobs_directory, scheduler=PBT, total_steps=600)
    try:
        loop.tick()
        for member in loop.members:
            loop.trained_to_hold(member)
        prepare, killed = pbt_generations.prepare, []

        def killed_meanwhile(store, fork, parent, parent_spec, generation):
            if not killed:  # the member the fork replaces is killed as its fork is made
                killed.append(client.set_intent(str(fork.member), Desired.KILLED, home=rlsup_home, start_daemon=False))
            return prepare(store, fork, parent, parent_spec, generation)

        monkeypatch.setattr(pbt_generations, "prepare", killed_meanwhile)
        loop.tick()
        loop.tick()
        assert killed, "no fork was made: the test's members did not rank apart"
        weak = killed[0].id
        strong = next(member.id for member in loop.members if member.id != weak)
        jobs = loop.client.experiment_jobs("e")
        assert [job.id for job in jobs] == [member.id for member in loop.members], [job.name for job in jobs]
        assert loop.client.job(weak).state is State.KILLED
        assert [(d.job_id, d.verdict) for d in standings.decisions(loop.client, [strong, weak])] == [
            (strong, standings.CONTINUED)]
        assert loop.client.job(strong).state in (State.QUEUED, State.STARTING)
        runs = Path(loop.members[0].run_dir).parent
        assert sorted(path.name for path in runs.iterdir() if "-g1-" in path.name) == []
        assert standings.orphaned_forks(loop.client, "e") == []
    finally:
        loop.close()
