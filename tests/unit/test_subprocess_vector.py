"""The subprocess vectoriser: the serial one's trajectories and states, clear errors, no process outliving its parent."""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import psutil
import pytest
from rlsup_testing import alive, group_killed_on_exit, wait_for
from test_vector import assert_same_vector_step, random_actions

from rlsup.algos.envs.action_replay import stable_digest
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.subprocess import SubprocessVectorEnv, slice_bounds
from rlsup.algos.envs.vector import SerialVectorEnv
from rlsup.algos.envs.vectorise import AUTO_ENVS_PER_SLICE, choose_vectoriser, counts_cpus, make_vector_env, spare_cpus
from rlsup.hardware import idle_cpus
from rlsup import spec as specs
from rlsup.spec import EnvSection

# A short time limit puts truncations and resets inside a few dozen steps.
CARTPOLE = EnvSection(id="CartPole-v1", max_episode_steps=12)
SEEDS = [11, 12, 13, 14, 15]  # five envs in two slices of 3 and 2: this process's and an env process's

BREAKING_ENV = '''
"""An env that raises on its fifth step."""
import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Discrete


class Breaking(gym.Env):
    """Env 2 of the test's vector breaks: the one in the env process."""

    observation_space = Box(0.0, 1.0, (2,), np.float32)
    action_space = Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.breaks = seed == 13 if seed is not None else self.breaks
        self.steps = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.steps == 5 and self.breaks:
            raise ValueError("this test env breaks on its fifth step")
        return np.zeros(2, np.float32), 0.0, False, False, {}


gym.register("Breaking-v0", entry_point=Breaking)
'''


@contextlib.contextmanager
def vectors(*made):
    try:
        yield made
    finally:
        for vector in made:
            vector.close()


def test_slices_are_contiguous_and_even() -> None:
    assert slice_bounds(5, 2) == [(0, 3), (3, 5)]
    assert slice_bounds(2, 8) == [(0, 1), (1, 2)]
    assert slice_bounds(4, 1) == [(0, 4)]


def test_it_steps_and_captures_exactly_as_the_serial_vectoriser() -> None:
    with vectors(SubprocessVectorEnv(CARTPOLE, SEEDS, slices=2), make_vector_env(CARTPOLE, SEEDS)) as (
            subprocesses, serial):
        assert len(subprocesses.pids) == 1 and isinstance(serial, SerialVectorEnv)
        assert (subprocesses.observation_shape, subprocesses.observation_dtype, subprocesses.num_actions) == (
            serial.observation_shape, serial.observation_dtype, serial.num_actions)
        assert np.array_equal(subprocesses.reset(), serial.reset())
        ended = 0
        for actions in random_actions(40, len(SEEDS)):
            result = subprocesses.step(actions)
            assert_same_vector_step(result, serial.step(actions))
            ended += len(result.episodes)
        assert ended >= len(SEEDS), "the time limit should have ended every env's episode at least once"
        assert stable_digest(subprocesses.state_dict()) == stable_digest(serial.state_dict())


@pytest.mark.parametrize("saved_by", ["serial", "subprocess"])
def test_a_state_taken_by_one_vectoriser_continues_bit_for_bit_in_the_other(saved_by: str) -> None:
    actions = random_actions(50, len(SEEDS))
    with vectors(SubprocessVectorEnv(CARTPOLE, SEEDS, slices=2), make_vector_env(CARTPOLE, SEEDS)) as made:
        original, copy = made if saved_by == "subprocess" else made[::-1]
        original.reset()
        for step_actions in actions[:17]:
            original.step(step_actions)
        copy.reset()
        for step_actions in actions[:3]:
            copy.step(step_actions)  # somewhere else: everything must come from the state
        assert copy.load_state_dict(original.state_dict()) == []
        for step_actions in actions[17:]:
            assert_same_vector_step(original.step(step_actions), copy.step(step_actions))


def test_a_state_of_another_env_count_is_refused() -> None:
    state = make_vector_env(CARTPOLE, SEEDS[:3]).state_dict()
    with vectors(SubprocessVectorEnv(CARTPOLE, SEEDS[:2])) as (vector,):
        with pytest.raises(ValueError, match="holds 3 envs, this vector steps 2"):
            vector.load_state_dict(state)


def test_an_env_that_cannot_be_made_is_the_env_error_the_serial_vectoriser_raises() -> None:
    with pytest.raises(EnvError, match="unknown env id 'CartPol-v1'; did you mean 'CartPole-v1'"):
        SubprocessVectorEnv(EnvSection(id="CartPol-v1"), SEEDS[:2])


def test_an_env_that_raises_in_its_process_is_a_clear_error(tmp_path: Path, monkeypatch, caplog) -> None:
    (tmp_path / "breaking_env.py").write_text(BREAKING_ENV)
    # On the PYTHONPATH the env processes inherit; this process's sys.path is not theirs.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(tmp_path))
    with vectors(SubprocessVectorEnv(EnvSection(id="breaking_env:Breaking-v0"), SEEDS[:3], slices=2)) as (
            vector,):
        vector.reset()
        for _ in range(4):
            vector.step(np.zeros(3, np.int64))
        with caplog.at_level(logging.ERROR, logger="rlsup.envs"), pytest.raises(EnvError) as raised:
            vector.step(np.zeros(3, np.int64))
    # The sentence the env's fault makes in the worker itself; the log says which process it was in.
    assert str(raised.value) == ("env 'breaking_env:Breaking-v0' raised in step: ValueError: this test env breaks "
                                 "on its fifth step (its traceback is in worker.log)")
    assert "the env process of envs 2-2 (breaking_env:Breaking-v0, pid " in caplog.text
    assert "in step\n" in caplog.text and 'raise ValueError("this test env breaks' in caplog.text


PARENT = textwrap.dedent("""
    import sys, time
    import numpy as np
    from rlsup.algos.envs.subprocess import SubprocessVectorEnv
    from rlsup.spec import EnvSection
    vector = SubprocessVectorEnv(EnvSection(id="CartPole-v1"), [1, 2, 3, 4], slices=3)
    vector.reset()
    print(*vector.pids, flush=True)
    sys.stdin.readline()
    vector.step(np.zeros(4, np.int64))
    print("stepped", flush=True)
    time.sleep(600)
""")


def test_env_processes_ignore_the_workers_signals_and_die_with_a_parent_killed_by_sigkill() -> None:
    with group_killed_on_exit(subprocess.Popen(
            [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}, start_new_session=True)) as parent:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(children) == 2 and set(children) == {child.pid for child in psutil.Process(parent.pid).children()}
        # As a terminal's Ctrl-C or hangup reaches them: the worker, not they, decides on a pause or reload.
        for pid, signum in itertools.product(children, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
            os.kill(pid, signum)
        parent.stdin.write("step\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == "stepped\n"
        parent.kill()  # SIGKILL: the parent gets no chance to tell anyone
        parent.wait(timeout=30)
        wait_for(lambda: not any(map(alive, children)), timeout=30, what="the env processes to die with their parent")


def test_the_vectoriser_field_picks_the_vectoriser_and_a_paused_run_may_change_it() -> None:
    with vectors(make_vector_env(dataclasses.replace(CARTPOLE, vectoriser="subprocess"), SEEDS[:2]),
                 make_vector_env(CARTPOLE, SEEDS[:2])) as (chosen, automatic):
        assert isinstance(chosen, SubprocessVectorEnv) and isinstance(automatic, SerialVectorEnv)
    spec = specs.JobSpec()
    assert specs.diff(spec, spec.replace("env", vectoriser="subprocess")) == [
        specs.Change("env.vectoriser", "auto", "subprocess", specs.RESUME)]


PONG = EnvSection(id="ALE/Pong-v5", preset="atari", clip_rewards=True)


@pytest.mark.parametrize(("env", "num_envs", "cpus", "expected"), [
    (PONG, 8, 2, ("subprocess", 2)),     # two slices of 4 ALE envs
    (PONG, 4, 2, ("subprocess", 2)),     # two slices of 2
    (PONG, 3, 2, ("serial", None)),      # a slice of 1 would not pay its round trip
    (PONG, 64, 4, ("subprocess", 4)),    # no more slices than CPUs
    (PONG, 16, 1, ("serial", None)),     # one spare CPU (or a busy machine): nothing to step at once
    (dataclasses.replace(PONG, vectoriser="serial"), 8, 2, ("serial", None)),
    (dataclasses.replace(CARTPOLE, vectoriser="subprocess"), 2, 1, ("subprocess", None)),  # as asked
    (EnvSection(id="MinAtar/Breakout-v1"), 64, 8, ("serial", None)),  # cheaper than a round trip
])
def test_auto_chooses_subprocess_for_ale_games_with_enough_envs_per_spare_cpu(env: EnvSection, num_envs: int,
                                                                              cpus: int, expected: tuple) -> None:
    choice = choose_vectoriser(env, num_envs, cpus)
    assert (choice.name, choice.slices) == expected
    assert choice.name in choice.reason


def test_auto_steps_an_ale_vector_in_the_slices_it_chose() -> None:
    seeds = list(range(2 * AUTO_ENVS_PER_SLICE))
    with vectors(make_vector_env(PONG, seeds, cpus=2), make_vector_env(PONG, seeds, cpus=1)) as (spread, alone):
        assert isinstance(spread, SubprocessVectorEnv) and len(spread.pids) == 1
        assert isinstance(alone, SerialVectorEnv)
        assert np.array_equal(spread.reset(), alone.reset())
        assert_same_vector_step(spread.step(np.ones(len(seeds), np.int64)), alone.step(np.ones(len(seeds), np.int64)))


def test_spare_cpus_are_usable_ones_split_among_the_vectors_made_side_by_side() -> None:
    usable = len(os.sched_getaffinity(0))
    assert 1 <= spare_cpus() <= usable
    assert spare_cpus(sharers=usable + 1) == 1


def test_idle_cpus_are_sampled_among_the_usable_ones() -> None:
    usable = len(os.sched_getaffinity(0))
    assert 0.0 <= idle_cpus(0.05) <= usable + 1e-6


@pytest.mark.parametrize(("env", "num_envs", "counts"), [
    (PONG, 4, True), (PONG, 3, False), (dataclasses.replace(PONG, vectoriser="serial"), 8, False),
    (EnvSection(id="MinAtar/Breakout-v1"), 64, False)])
def test_spare_cpus_are_read_only_where_the_choice_depends_on_them(env: EnvSection, num_envs: int,
                                                                 counts: bool) -> None:
    assert counts_cpus(env, num_envs) is counts
    # Where it does not, every CPU count gives the same choice: skipping the 0.1 s sample changes nothing.
    if not counts:
        assert len({choose_vectoriser(env, num_envs, cpus).name for cpus in (1, 2, 64)}) == 1
