"""V-trace in real processes: serial bit-exact resume, parallel pause/resume with replays intact, no orphan actors."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import numpy as np
import psutil
import torch

from rlsup.run import files as runfiles
from rlsup.algos.actor_processes import groups_per_actor
from rlsup.algos.impala import VtraceTrainer
from rlsup.algos.nets import build_policy_value_network, fingerprint
from rlsup.algos.shared_memory import WeightsBuffer
from rlsup.checkpoint.choose import latest_verified
from rlsup.checkpoint.store import load_checkpoint
from rlsup.run.exit import EXIT_PAUSED, read_exit
from rlsup.jobs.state import State
from rlsup_testing import (alive, final_fingerprint, metric_steps, pause_when, run_rlsup, start_in_own_session,
                            start_rlsup, vtrace_text, wait_for)

STEPS_PER_UPDATE = 10 * 8  # unroll_length × batch_size below

# λ anneals over environment steps: it is 1 from update 80 (alfa 2).
ELITE_REPLAY = {"kind": "elite", "capacity": 64, "ratio": 0.5, "min_size": 16, "lambda_batch_multiplier": 3.0,
                "anneal_steps": 3_200}


def vtrace_job(directory: Path, *, total_steps: int, serial: bool, name: str = "vtrace") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(vtrace_text(total_steps=total_steps, serial=serial, actors=2, envs_per_actor=2,
                                unroll_length=10, batch_size=8, lr=2e-3, lr_end_step=1_000_000,
                                hidden_sizes=[32, 32], feature_size=16,
                                replays=({"kind": "queue", "capacity": 4, "ratio": 0.5}, ELITE_REPLAY)))
    return path


def actor_pids(run_dir: Path) -> list[int]:
    """Actor pids as the newest worker logged them."""
    found = re.findall(r"V-trace actor processes \(pids ([\d ]+)\)", (run_dir / "worker.log").read_text())
    return [int(pid) for pid in found[-1].split()] if found else []


def process_name(pid: int) -> str:
    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).name()
    return ""


def wait_for_actors_set_up(actors: list[int]) -> None:
    """Training can pass a step on one actor's unrolls while another still imports under load: wait
    until every actor has named itself, which it does together with asking for PDEATHSIG."""
    wait_for(lambda: all(process_name(pid).startswith("rlsup-actor") for pid in actors), timeout=60,
             what="every actor to name itself")


def wait_for_training(run_dir: Path, process: subprocess.Popen | None, past_step: int) -> None:
    def trained() -> bool:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the worker exited early: {process.communicate()}")
        return any(step > past_step for step in metric_steps(run_dir, "train"))
    wait_for(trained, timeout=120, what=f"a train record past step {past_step}")


def replay_checksums(tree, where: str = "") -> dict[str, str]:
    """sha256 of every array (dtype, shape, bytes) and the value of every scalar in a replay state tree."""
    if isinstance(tree, dict):
        return {key: value for name, item in tree.items()
                for key, value in replay_checksums(item, f"{where}/{name}").items()}
    if isinstance(tree, (np.ndarray, torch.Tensor)):
        array = np.ascontiguousarray(np.asarray(tree))
        digest = hashlib.sha256(f"{array.dtype}{array.shape}".encode() + array.tobytes()).hexdigest()
        return {where: digest}
    return {where: repr(tree)}


# ---- weights publishing -----------------------------------------------------------------------------


def test_actors_copy_published_weights_and_keep_them_until_the_next_load() -> None:
    learner = build_policy_value_network((4,), 2, [8], 4)
    actor = build_policy_value_network((4,), 2, [8], 4)
    weights = WeightsBuffer(learner, shared=True)
    version = weights.load_into(actor, known_version=-1)
    assert fingerprint(actor) == fingerprint(learner)
    with torch.no_grad():
        for parameter in learner.parameters():
            parameter.add_(1.0)
    weights.publish(learner)
    before = fingerprint(actor)
    assert fingerprint(actor) != fingerprint(learner), "an actor's weights must not change under its feet"
    assert weights.load_into(actor, known_version=version + 1) == version + 1 and fingerprint(actor) == before
    assert weights.load_into(actor, known_version=version) == version + 1
    assert fingerprint(actor) == fingerprint(learner)


# ---- serial mode ------------------------------------------------------------------------------------


def test_serial_pause_then_resume_is_bit_exact(tmp_path: Path) -> None:
    total = 200 * STEPS_PER_UPDATE
    job = vtrace_job(tmp_path, total_steps=total, serial=True)
    straight = tmp_path / "straight"
    result = run_rlsup("run", job, "--run-dir", straight)
    assert result.returncode == 0, result.stderr

    run_dir = tmp_path / "paused"
    process = start_rlsup("run", job, "--run-dir", run_dir)
    pause_when(process, run_dir, train_step=total // 4)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_PAUSED, stderr
    paused_step = read_exit(run_dir).step
    assert total // 4 <= paused_step < total

    result = run_rlsup("run", "--resume", run_dir)
    assert result.returncode == 0, result.stderr
    assert read_exit(run_dir).step == total
    assert final_fingerprint(run_dir) == final_fingerprint(straight)


# ---- parallel mode ----------------------------------------------------------------------------------


def test_parallel_pause_and_resume_under_the_daemon(harness) -> None:
    total = 600 * STEPS_PER_UPDATE  # far enough for the pause to land mid-run on a fast machine
    harness.start_daemon()
    job = harness.submit(vtrace_job(harness.jobs_directory, total_steps=total, serial=False))
    harness.wait_step(job.id, 30 * STEPS_PER_UPDATE)
    run_dir = Path(harness.job(job.id).run_dir)
    first_actors = actor_pids(run_dir)
    assert len(first_actors) == 2

    code, _, _ = harness.cli("pause", str(job.id))
    assert code == 0
    harness.wait_state(job.id, State.PAUSED, timeout=60)
    assert read_exit(run_dir).code == EXIT_PAUSED
    wait_for(lambda: not any(map(alive, first_actors)), timeout=10, what="the actors to exit with their learner")
    paused_step = read_exit(run_dir).step
    paused = [record for record in runfiles.read_metrics(run_dir) if record["kind"] == "train"][-1]
    assert_replays_round_trip(run_dir)

    code, _, _ = harness.cli("resume", str(job.id))
    assert code == 0
    harness.wait_state(job.id, State.DONE, timeout=120)
    assert read_exit(run_dir).step == total
    resumed = [record for record in runfiles.read_metrics(run_dir)
               if record["kind"] == "train" and record["step"] > paused_step]
    assert resumed, "no training after the resume"
    # The counters went on from the checkpoint, and the new actors trained the same network further.
    assert resumed[0]["episodes"] >= paused["episodes"] and resumed[-1]["updates"] == total // STEPS_PER_UPDATE
    assert resumed[-1]["unrolls"] > paused["unrolls"]
    assert set(actor_pids(run_dir)).isdisjoint(first_actors)


def assert_replays_round_trip(run_dir: Path) -> None:
    """The pause checkpoint's replays (queue and elite, with sample counts and lambda) load back unchanged."""
    entry = latest_verified(run_dir)
    assert entry is not None and entry.reason == "pause"
    _, state = load_checkpoint(entry.path)
    saved = state["trainer"]["replay"]
    assert all(part["storage"]["size"] > 0 for part in saved.values()), "the replays were still empty"
    trainer = VtraceTrainer(runfiles.read_run_spec(run_dir), torch.device("cpu"))
    try:
        trainer.load_state_dict(state["trainer"])
        assert trainer.step == entry.step
        assert replay_checksums(trainer.replays.state_dict()) == replay_checksums(saved)
    finally:
        trainer.close()


def test_actors_ignore_ctrl_c_and_never_outlive_their_learner(tmp_path: Path) -> None:
    job = vtrace_job(tmp_path, total_steps=10_000_000, serial=False)
    run_dir = tmp_path / "run"
    process = start_in_own_session("run", job, "--run-dir", run_dir)
    try:
        wait_for_training(run_dir, process, past_step=10 * STEPS_PER_UPDATE)
        actors = actor_pids(run_dir)
        # The actors are forked by multiprocessing's fork server, the worker's child: its grandchildren.
        descendants = {child.pid for child in psutil.Process(process.pid).children(recursive=True)}
        assert len(actors) == 2 and set(actors) <= descendants
        wait_for_actors_set_up(actors)
        # A terminal's Ctrl-C reaches the whole group: the actors must leave the pause to the learner.
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
        assert process.returncode == EXIT_PAUSED, stderr
        assert "Traceback" not in stderr, stderr
        wait_for(lambda: not any(map(alive, actors)), timeout=10, what="the actors to exit after the pause")

        process = start_in_own_session("run", "--resume", run_dir)
        wait_for_training(run_dir, process, past_step=read_exit(run_dir).step)
        actors = actor_pids(run_dir)
        assert all(map(alive, actors))
        wait_for_actors_set_up(actors)  # a still-importing actor has not asked for PDEATHSIG yet
        process.kill()  # SIGKILL: the learner gets no chance to tell anyone
        process.communicate(timeout=30)
        wait_for(lambda: not any(map(alive, actors)), timeout=5, what="the actors to die with their learner")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)


def test_closed_actors_leave_no_queue_thread_to_race_the_exit(tmp_path: Path) -> None:
    """A queue's feeder thread holds two of its semaphores: left running past close(), it dropped them at the
    worker's os._exit, unlinked one and died before telling Python's resource tracker, which then printed a
    "leaked semaphore" warning after the run's last sentence (CI, test_env_faults, 1 run in ~50)."""
    from rlsup.spec import loading
    spec = loading.loads(vtrace_job(tmp_path, total_steps=400, serial=False).read_text())
    trainer = VtraceTrainer(spec, torch.device("cpu"))
    while trainer.step < 200:
        trainer.iterate()
    trainer.close()
    feeders = [thread for thread in threading.enumerate() if thread.name == "QueueFeederThread"]
    assert feeders == []


def test_actors_fill_a_whole_batch_while_the_learner_takes_nothing(tmp_path: Path) -> None:
    """The learner takes the actors' rounds only between updates. With two groups each, Pong's actors filled
    theirs early in an update and waited out the rest, and the learner then waited for the batch: the actors
    must be able to hold a whole batch while the learner takes nothing."""
    from rlsup.spec import loading
    # A batch of 16 is four rounds of each actor's 2 envs: two groups each held only half of it.
    spec = loading.loads(vtrace_text(total_steps=10_000, serial=False, actors=2, envs_per_actor=2,
                                     unroll_length=10, batch_size=16, hidden_sizes=[32, 32], feature_size=16,
                                     replays=({"kind": "queue", "capacity": 16},)))
    settings = spec.vtrace
    trainer = VtraceTrainer(spec, torch.device("cpu"))
    try:
        trainer.actors.start(generation=0)
        expected = settings.actors * groups_per_actor(settings)
        deliveries = []

        def all_groups_full() -> bool:
            deliveries.extend(trainer.actors.receive(0.2))
            return len(deliveries) >= expected
        wait_for(all_groups_full, timeout=120, what=f"{expected} rounds from actors never released")
        deliveries.extend(trainer.actors.receive(2.0))  # a round past every group would come now
        assert len(deliveries) == expected
        assert len(deliveries) * settings.envs_per_actor >= settings.batch_size
    finally:
        trainer.close()
