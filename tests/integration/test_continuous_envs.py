"""Continuous envs from the command line and across processes: `rlsup validate` names an algorithm that does not train
an env's actions (exit 2), and the subprocess vectoriser steps and resumes float actions as the serial one does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from continuous_envs import DRIFT_ID, MODULE, TESTS_DIRECTORY
from rlsup_testing import assert_one_line_error, run_rlsup

from rlsup.algos.envs.action_replay import stable_digest
from rlsup.algos.envs.subprocess import SubprocessVectorEnv
from rlsup.algos.envs.vector import VectorStep
from rlsup.algos.envs.vectorise import make_vector_env
from rlsup.spec import EnvSection


def assert_same_vector_step(first: VectorStep, second: VectorStep) -> None:
    for name in ("observations", "rewards", "terminals", "dones", "truncated"):
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    assert stable_digest(first.final_observations) == stable_digest(second.final_observations)
    assert first.episodes == second.episodes


def job_file(directory: Path, algo: str, env_id: str, imports: str = "") -> Path:
    path = directory / f"{algo}.toml"
    path.write_text(f'[job]\nalgo = "{algo}"\ntotal_steps = 1_000\n\n[env]\nid = "{env_id}"\n{imports}')
    return path


def test_validate_refuses_dqn_on_pendulum_at_its_algo_line(tmp_path: Path) -> None:
    path = job_file(tmp_path, "dqn", "Pendulum-v1")
    assert_one_line_error(run_rlsup("validate", path), 2, f"{path}:2: job.algo: env id 'Pendulum-v1' has continuous "
                          "actions (a 1-vector in [-2, 2]); algo 'dqn' trains discrete ones: use algo = ", '"sac"')


def test_validate_names_a_continuous_envs_actions(tmp_path: Path) -> None:
    result = run_rlsup("validate", job_file(tmp_path, "sac", "Pendulum-v1"))
    assert result.returncode == 0, result.stderr
    assert "vector 3 float32 observations, a 1-vector in [-2, 2]" in result.stdout


def test_validate_refuses_a_dict_of_actions_at_the_env_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIRECTORY))
    path = job_file(tmp_path, "sac", "ContinuousTests/DictActions-v0", f'imports = ["{MODULE}"]\n')
    assert_one_line_error(run_rlsup("validate", path), 2, f"{path}:6: env.id:", "has the action space Dict(",
                          "not a Dict")


@pytest.mark.parametrize("env", [EnvSection(id="Pendulum-v1", max_episode_steps=15), EnvSection(id="Hopper-v5")])
def test_the_subprocess_vectoriser_steps_and_resumes_float_actions_as_the_serial_one(env: EnvSection) -> None:
    seeds = [3, 4, 5]
    actions = np.random.default_rng(0).uniform(-1.2, 1.2, size=(70, len(seeds), 1 if "Pendulum" in env.id else 3))
    subprocesses, serial = SubprocessVectorEnv(env, seeds, slices=2), make_vector_env(env, seeds)
    try:
        assert subprocesses.actions == serial.actions and subprocesses.num_actions == serial.actions.count
        assert np.array_equal(subprocesses.reset(), serial.reset())
        for row in actions[:30]:
            assert_same_vector_step(subprocesses.step(row), serial.step(row))
        state = subprocesses.state_dict()
        assert stable_digest(state) == stable_digest(serial.state_dict())
        resumed = make_vector_env(env, [11, 12, 13])
        resumed.reset()
        assert resumed.load_state_dict(state) == []
        for row in actions[30:]:
            assert_same_vector_step(subprocesses.step(row), resumed.step(row))
        resumed.close()
    finally:
        subprocesses.close(), serial.close()


def test_a_diverged_policys_action_in_an_env_process_is_the_same_sentence() -> None:
    from rlsup.algos.envs.sources import EnvError

    env = EnvSection(id=DRIFT_ID, imports=[MODULE])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", str(TESTS_DIRECTORY))
        subprocesses = SubprocessVectorEnv(env, [1, 2], slices=2)
    try:
        subprocesses.reset()
        with pytest.raises(EnvError, match=r"the policy produced the non-finite action \[nan, 0.0\] at step 1 .*"
                                           "the learner has diverged"):
            subprocesses.step(np.array([[0.0, 0.0], [np.nan, 0.0]], np.float32))
    finally:
        subprocesses.close()


RENDER_PROGRAM = '''
import io
import sys
from pathlib import Path
import numpy as np
from rlsup.algos.evaluate import play_episodes
from rlsup.enjoy import VideoRecorder, frame_rate, require_renderer
from rlsup.frames import TerminalPlayer
from rlsup.spec import EnvSection

env = EnvSection(id="Hopper-v5", max_episode_steps=6)
require_renderer(env)  # before mujoco is imported: it chooses an OpenGL backend that draws off screen
frames = []
recorder = VideoRecorder(Path(sys.argv[1]), fps=frame_rate(env.id))
terminal = io.StringIO()
player = TerminalPlayer(fps=0, stream=terminal, terminal_size=lambda: (80, 24))

def sink(frame):
    frames.append(frame.shape)
    recorder(frame)
    player(frame)

play_episodes(lambda observations: np.zeros((1, 3), np.float32), env, seed=0, episodes=1, on_frame=sink)
recorder.close()
player.close()
Path(sys.argv[2]).write_text(terminal.getvalue())
print(frame_rate(env.id), len(frames), frames[0])
'''


def test_a_mujoco_env_renders_off_screen_to_video_and_the_terminal(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    video, drawn = tmp_path / "hopper.mp4", tmp_path / "terminal.txt"
    result = subprocess.run([sys.executable, "-c", RENDER_PROGRAM, str(video), str(drawn)], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["125.0", "6", "(480,", "480,", "3)"]  # Hopper's real time: 1 / 0.008 s
    assert video.stat().st_size > 1000
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hopper.mp4", "terminal.txt"]
    frames = drawn.read_text().split("\x1b[H")[1:]
    assert len(frames) == 6
    # A square frame in half-block cells: as many columns as twice the rows, in the 22 rows a 24-line terminal leaves.
    rows = [line for line in frames[0].splitlines() if "\u2580" in line]
    assert len(rows) == 22 and {line.count("\u2580") for line in rows} == {44}
    assert len(set(frames[0].split("\x1b[38;2;"))) > 50  # many colours: a drawing, not a blank box
