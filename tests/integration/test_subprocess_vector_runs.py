"""[env] vectoriser = "subprocess" in real `rlsup run` workers: the serial vectoriser's fingerprints, bit-exact
resume after a Ctrl-C mid-episode, no env process outliving a SIGKILLed worker, a raising env named in worker.log,
and "auto" resolved anew on resume (another machine's choice) without changing the run."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import numpy as np
import psutil
from rlsup_testing import (alive, breakout_job, cartpole_job, final_fingerprint, group_killed_on_exit, pause_when,
                           rlsup_command, run_rlsup, start_in_own_session, start_rlsup, wait_for)
from test_impala import vtrace_job, wait_for_training

from rlsup.algos.envs.subprocess import default_slices, slice_bounds
from rlsup.algos.envs.vectorise import env_seeds
from rlsup.checkpoint.manifest import list_checkpoints
from rlsup.run.exit import EXIT_PAUSED, read_exit

BREAKING_ENV = '''
import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete


class Breaking(gym.Env):
    """The env first reset with seed {seed} breaks on the 300th step of its life."""

    observation_space = Box(0.0, 1.0, (2,), np.float32)
    action_space = Discrete(2)
    steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.breaks = seed == {seed} if self.steps == 0 else self.breaks
        return np.zeros(2, np.float32), {{}}

    def step(self, action):
        self.steps += 1
        if self.steps == 300 and self.breaks:
            raise ValueError("this test env breaks on its 300th step")
        return np.zeros(2, np.float32), 0.0, self.steps % 20 == 0, False, {{}}


gym.register("Breaking-v0", entry_point=Breaking)
'''


def with_env_fields(job: Path, **fields: object) -> Path:
    """The job file with fields added to its [env] table."""
    text = job.read_text()
    assert "\n[env]\n" in text
    lines = "".join(f"{name} = {value!r}\n".replace("'", '"') for name, value in fields.items())
    job.write_text(text.replace("\n[env]\n", f"\n[env]\n{lines}", 1))
    return job


def env_process_pids(run_dir: Path) -> list[int]:
    """Every env process the run's workers logged starting (one vector each per DQN worker or V-trace actor)."""
    found = re.findall(r"env processes \(pids ([\d ]+)\)", (run_dir / "worker.log").read_text())
    return [int(pid) for line in found for pid in line.split()]


def env_processes(num_envs: int) -> int:
    """How many env processes a subprocess vector of num_envs envs has on this machine (its first slice is
    stepped by its owner)."""
    return len(slice_bounds(num_envs, default_slices())) - 1


def test_dqn_in_env_processes_matches_serial_and_resumes_bit_exact_after_ctrl_c(tmp_path: Path) -> None:
    total = 4_000

    def job(label: str, vectoriser: str) -> Path:
        return with_env_fields(cartpole_job(tmp_path, total_steps=total, name=label), num_envs=4,
                               vectoriser=vectoriser)

    runs = {}
    for vectoriser in ("serial", "subprocess"):
        runs[vectoriser] = tmp_path / vectoriser
        result = run_rlsup("run", job(vectoriser, vectoriser), "--run-dir", runs[vectoriser])
        assert result.returncode == 0, result.stderr
    assert final_fingerprint(runs["subprocess"]) == final_fingerprint(runs["serial"])
    assert len(env_process_pids(runs["subprocess"])) == env_processes(4) and not env_process_pids(runs["serial"])

    paused = tmp_path / "paused"
    with group_killed_on_exit(start_in_own_session("run", job("paused", "subprocess"), "--run-dir", paused)) as process:
        wait_for_training(paused, process, past_step=1_500)
        os.killpg(process.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the env processes too
        _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_PAUSED, stderr
    assert "Traceback" not in stderr, stderr
    assert 1_500 < read_exit(paused).step < total
    assert mid_episode_envs(paused) > 0, "the pause should fall mid-episode"
    result = run_rlsup("run", "--resume", paused)
    assert result.returncode == 0, result.stderr
    assert final_fingerprint(paused) == final_fingerprint(runs["serial"])


def mid_episode_envs(run_dir: Path) -> int:
    """How many envs of the newest checkpoint were inside an episode when it was written."""
    state = json.loads((list_checkpoints(run_dir)[-1].path / "state.json").read_text())
    episodes = [env["episode"] for env in state["trainer"]["envs"].values()]
    return sum(1 for episode in episodes if not episode["needs_reset"] and episode["length"] > 0)


def test_vtrace_serial_actors_in_env_processes_match_serial(tmp_path: Path) -> None:
    fingerprints = {}
    for vectoriser in ("serial", "subprocess"):
        job = with_env_fields(vtrace_job(tmp_path, total_steps=3_200, serial=True, name=vectoriser),
                              vectoriser=vectoriser)
        result = run_rlsup("run", job, "--run-dir", tmp_path / vectoriser)
        assert result.returncode == 0, result.stderr
        fingerprints[vectoriser] = final_fingerprint(tmp_path / vectoriser)
    assert len(env_process_pids(tmp_path / "subprocess")) == 2 * env_processes(2)  # two actors
    assert fingerprints["subprocess"] == fingerprints["serial"]


def test_no_env_process_outlives_a_worker_killed_by_sigkill(tmp_path: Path) -> None:
    job = with_env_fields(cartpole_job(tmp_path, total_steps=10_000_000), num_envs=4, vectoriser="subprocess")
    run_dir = tmp_path / "run"
    with group_killed_on_exit(start_in_own_session("run", job, "--run-dir", run_dir)) as process:
        wait_for_training(run_dir, process, past_step=500)
        children = env_process_pids(run_dir)
        assert len(children) == env_processes(4) and set(children) <= {child.pid for child in psutil.Process(process.pid).children()}
        process.kill()  # SIGKILL of the worker alone: nothing tells its env processes
        process.communicate(timeout=30)
        wait_for(lambda: not any(map(alive, children)), timeout=30, what="the env processes to die with the worker")


def test_an_env_raising_in_its_process_stops_the_run_with_the_error_in_worker_log(tmp_path: Path,
                                                                                 monkeypatch) -> None:
    # Env 1 of 2 is the one in the env process; the other is stepped by the worker itself.
    second_seed = env_seeds(np.random.SeedSequence(7), 2)[1]  # cartpole_job's seed
    (tmp_path / "breaking_env.py").write_text(BREAKING_ENV.format(seed=second_seed))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    job = with_env_fields(cartpole_job(tmp_path, total_steps=5_000), num_envs=2, vectoriser="subprocess")
    job.write_text(job.read_text().replace('id = "CartPole-v1"', 'id = "breaking_env:Breaking-v0"'))
    run_dir = tmp_path / "run"
    result = run_rlsup("run", job, "--run-dir", run_dir, timeout=120)
    assert result.returncode not in (0, EXIT_PAUSED), result.stderr
    log = (run_dir / "worker.log").read_text()
    assert "the env process of envs 1-1 (breaking_env:Breaking-v0, pid " in log, log
    assert 'raise ValueError("this test env breaks' in log  # the env's own traceback, from its process
    assert read_exit(run_dir).reason == ("env 'breaking_env:Breaking-v0' raised in step: ValueError: "
                                                     "this test env breaks on its 300th step (its traceback is in "
                                                     "worker.log)")


def pinned_to_one_cpu(*arguments: str) -> list[str]:
    """`rlsup ARGS` run on one CPU only: a machine on which [env] vectoriser = "auto" resolves to serial."""
    return ["taskset", "-c", str(min(os.sched_getaffinity(0))), *rlsup_command(*arguments)]


def resolved_vectorisers(run_dir: Path) -> list[str]:
    """What "auto" became each time the run's worker made its vector, in order (worker.log)."""
    return re.findall(r"\[env\] vectoriser auto: (\w+)", (run_dir / "worker.log").read_text())


def test_a_run_paused_in_env_processes_resumes_bit_exact_where_auto_resolves_to_serial(tmp_path: Path) -> None:
    total = 800

    def job(label: str, **fields: object) -> Path:
        return with_env_fields(breakout_job(tmp_path, total_steps=total, name=label), num_envs=8, **fields)

    straight = tmp_path / "straight"
    result = subprocess.run(pinned_to_one_cpu("run", job("straight"), "--run-dir", straight), capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    paused = tmp_path / "paused"
    process = start_rlsup("run", job("paused", vectoriser="subprocess"), "--run-dir", paused)
    pause_when(process, paused, train_step=400)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == EXIT_PAUSED, stderr
    assert mid_episode_envs(paused) > 0, "the pause should fall mid-episode"
    # Resumed on "another machine", of one CPU, with the job back at the default: auto resolves to serial.
    result = subprocess.run(pinned_to_one_cpu("run", "--resume", paused, job("resumed")), capture_output=True,
                            text=True, timeout=240)
    assert result.returncode == 0, result.stderr
    assert env_process_pids(paused) and resolved_vectorisers(paused) == ["serial"]
    assert resolved_vectorisers(straight) == ["serial"]
    assert final_fingerprint(paused) == final_fingerprint(straight)
