"""Overlapped DQN (`[dqn] overlap`): the learner's round beside the env step, and still one run however it is cut."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from rlsup_testing import (cartpole_job, cartpole_text, final_fingerprint, group_killed_on_exit, metric_steps,
                           run_rlsup, start_in_own_session, start_rlsup, wait_for)

from rlsup.algos.dqn import DqnTrainer
from rlsup.algos.learner_process import PROCESS_NAME as LEARNER_PROCESS, LearnerProcess
from rlsup.algos.overlap import LearnerThread
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.jobs.state import State
from rlsup.run.exit import EXIT_PAUSED
from rlsup.spec import loading

STEPS = 2_000
# The small job learns from step 200 in rounds of 2 gradient steps every 8 steps, and copies its target
# every 100: pauses inside a round's 8 steps, on a target copy (which closes a round), and inside a round
# much later. (A budget raised on resume is the live edit's test below, under the daemon.)
PAUSE_STEPS = (203, 300, 1_237)


def trainer(total_steps: int = STEPS, *, overlap: bool = True) -> DqnTrainer:
    spec = loading.loads(cartpole_text(total_steps=total_steps, seed=11, overlap=overlap))
    return DqnTrainer(spec, torch.device("cpu"))


def train_to(run: DqnTrainer, step: int) -> DqnTrainer:
    while run.step < step:
        run.iterate()
    return run


@pytest.fixture(scope="module")
def straight_trainer() -> DqnTrainer:
    run = train_to(trainer(), STEPS)
    run.close()
    return run


@pytest.fixture(scope="module")
def straight(straight_trainer: DqnTrainer) -> str:
    return straight_trainer.fingerprint()


@pytest.mark.parametrize("pause_step", PAUSE_STEPS)
def test_a_checkpoint_at_any_point_of_the_cycle_continues_bit_for_bit(straight: str, pause_step: int) -> None:
    first = train_to(trainer(), pause_step)
    state = first.state_dict()
    resumed = trainer()
    resumed.load_state_dict(state)
    first.close()
    assert resumed.fingerprint() == first.fingerprint()
    train_to(resumed, STEPS).close()
    assert resumed.fingerprint() == straight


def test_overlap_is_its_own_run_that_learns_on_the_same_schedule(straight_trainer: DqnTrainer) -> None:
    plain = train_to(trainer(overlap=False), STEPS)
    plain.close()
    # A one-round policy lag and batches drawn before the step: another run, with as many gradient steps.
    assert plain.fingerprint() != straight_trainer.fingerprint()
    assert straight_trainer.learner.updates == plain.learner.updates == 2 * ((STEPS - 200) // 8 + 1)


def same_weights(first: torch.nn.Module, second: torch.nn.Module) -> bool:
    return all(torch.equal(one, two) for one, two in zip(first.parameters(), second.parameters()))


def learner_processes() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True) if child.name() == LEARNER_PROCESS]


def test_the_envs_act_one_round_behind_and_the_process_never_outlives_its_trainer() -> None:
    run = trainer()
    # Step 300 copies the target, which closes the round opened at 296: the envs then act with its result.
    train_to(run, 300)
    assert not run.learner_rounds.round and run.round_losses == []
    assert same_weights(run.learner.acting.module, run.learner.online)
    assert same_weights(run.learner.target, run.learner.online)
    # Step 304 opens the next round; when it has run the envs still act with the weights from before it.
    train_to(run, 304)
    assert len(learner_processes()) == 1
    run._wait_round()
    assert len(run.round_losses) == 2
    assert not same_weights(run.learner.acting.module, run.learner.online)
    run.close()
    assert learner_processes() == []


def test_a_learner_thread_and_a_learner_process_make_the_same_run(straight_trainer: DqnTrainer) -> None:
    # The process runs the thread's update on the same tensors, shared: where rounds run is not the run.
    assert isinstance(straight_trainer.learner_rounds, LearnerProcess)
    run = trainer()
    run.learner_rounds = LearnerThread(run.learner, torch.device("cpu"))
    train_to(run, STEPS).close()
    assert run.fingerprint() == straight_trainer.fingerprint()
    assert run.loss_sums.totals() == straight_trainer.loss_sums.totals()


def test_a_restore_hands_the_learner_process_the_restored_optimizer(straight: str) -> None:
    # Two resumes into one trainer: the second replaces the optimizer state the process was started on.
    first = train_to(trainer(), 700)
    resumed = train_to(trainer(), 400)
    resumed.load_state_dict(first.state_dict())
    first.close()
    train_to(resumed, STEPS).close()
    assert resumed.fingerprint() == straight


def test_a_failing_round_is_raised_by_its_step_and_leaves_no_process(monkeypatch) -> None:
    run = train_to(trainer(), 250)
    # A real failure in the learner: a batch of the wrong width reaches the network.
    original = run._sample
    monkeypatch.setattr(run, "_sample", lambda step: original(step).__class__(
        **{**original(step).__dict__, "observations": np.zeros((32, 3), np.float32)}))
    with pytest.raises(RuntimeError, match=r"the DQN learner process \(pid \d+\) failed: RuntimeError: "):
        train_to(run, 300)
    assert not run.learner_rounds.round
    run.close()
    assert learner_processes() == []


@pytest.mark.parametrize("kill_step", [250, 300])
def test_a_learner_process_killed_mid_run_is_named_by_the_next_step(kill_step: int) -> None:
    # At 250 a round is out (opened at 248); at 300 the target copy has just closed it: the next one is sent.
    run = train_to(trainer(), kill_step)
    assert bool(run.learner_rounds.round) == (kill_step == 250)
    (process,) = learner_processes()
    process.kill()
    run.learner_rounds.process.join(timeout=30)  # the worker's own reaping, as a real death is seen
    with pytest.raises(RuntimeError, match=r"the DQN learner process \(pid \d+\) was killed by signal 9 \(SIGKILL\)"):
        train_to(run, 400)
    run.close()


# -- real processes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("overlap")
    result = run_rlsup("run", cartpole_job(directory, total_steps=STEPS, seed=11, overlap=True,
                                           checkpoint_every=500), "--run-dir", directory / "run")
    assert result.returncode == 0, result.stderr
    return directory / "run"


def test_a_ctrl_c_to_the_whole_group_twice_pauses_and_resumes_bit_exact(tmp_path: Path, straight_run: Path) -> None:
    # A terminal's Ctrl-C reaches the learner process too, which ignores it: the worker pauses, once.
    run_dir = tmp_path / "run"
    job = cartpole_job(tmp_path, total_steps=STEPS, seed=11, overlap=True, checkpoint_every=500)
    process = start_in_own_session("run", job, "--run-dir", run_dir)
    with group_killed_on_exit(process):
        wait_for(lambda: any(step >= 700 for step in metric_steps(run_dir, "train")) or process.poll() is not None,
                 what="a train record past step 700")
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(run_dir) == final_fingerprint(straight_run)


def test_sigkill_then_resume_from_the_last_checkpoint_is_bit_exact(tmp_path: Path, straight_run: Path) -> None:
    run_dir = tmp_path / "run"
    process = start_rlsup("run", cartpole_job(tmp_path, total_steps=STEPS, seed=11, overlap=True,
                                              checkpoint_every=500), "--run-dir", run_dir)
    wait_for(lambda: any(entry.step >= 500 for entry in list_checkpoints(run_dir)) or process.poll() is not None,
             what="a checkpoint at step 500")
    (learner,) = [child for child in psutil.Process(process.pid).children(recursive=True)
                  if child.name() == LEARNER_PROCESS]
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    # The kernel kills the learner process with its worker: nothing trains on unseen.
    wait_for(lambda: not learner.is_running() or learner.status() == psutil.STATUS_ZOMBIE,
             what="the learner process to die with its worker")
    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(run_dir) == final_fingerprint(straight_run)


def test_turning_overlap_off_is_an_identity_edit_refused_on_resume(tmp_path: Path, straight_run: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(straight_run, run_dir)
    edited = cartpole_job(tmp_path, name="edited", total_steps=2 * STEPS, seed=11, checkpoint_every=500)
    result = run_rlsup("run", "--resume", run_dir, edited)
    assert result.returncode != 0
    assert "dqn.overlap" in result.stderr


def test_a_fork_of_an_overlapped_run_continues_it_exactly(harness) -> None:
    harness.start_daemon()
    parent_file = harness.jobs_directory / "parent.toml"
    parent_file.write_text(cartpole_text(total_steps=STEPS, seed=11, overlap=True, checkpoint_every=1_000))
    parent = harness.submit(parent_file)
    harness.wait_state(parent.id, State.DONE)
    code, out, err = harness.cli("fork", str(parent.id), str(Path(parent.run_dir) / "job.toml"), "--checkpoint", "1000")
    assert code == 0, err
    child = harness.wait_state(int(out.strip()), State.DONE)
    assert final_fingerprint(Path(child.run_dir)) == final_fingerprint(Path(parent.run_dir))


def test_the_foreground_run_is_the_in_process_run(straight: str, straight_run: Path) -> None:
    assert final_fingerprint(straight_run) == straight


def test_a_live_budget_edit_ends_the_running_job_exactly_there(harness) -> None:
    harness.start_daemon()
    spec = harness.jobs_directory / "live.toml"
    original = cartpole_text(total_steps=1_000_000, seed=11, overlap=True, checkpoint_every=0)
    spec.write_text(original)
    job = harness.submit(spec)
    # Room for the edit to reach the worker on a loaded machine (see test_daemon_edits.py).
    budget = harness.wait_step(job.id, 300).step + 4_000
    spec.write_text(original.replace("total_steps = 1000000", f"total_steps = {budget}"))
    done = harness.wait_state(job.id, State.DONE, timeout=300)
    assert done.step == budget
    run = train_to(trainer(budget), budget)
    run.close()
    assert final_fingerprint(Path(done.run_dir)) == run.fingerprint()
