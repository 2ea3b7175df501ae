"""`rlsup enjoy --render terminal` on a tiny trained Breakout run: half-block frames, drawn in place, exit 0."""
from __future__ import annotations

import json
import os
import subprocess

from rlsup_testing import breakout_job, cartpole_job, cartpole_text, rlsup_command, run_rlsup, video_start

from rlsup import spec as specs
from rlsup.run import files as runfiles


def test_enjoy_draws_breakout_in_the_terminal(tmp_path):
    run_dir = tmp_path / "run"
    trained = run_rlsup("run", breakout_job(tmp_path, total_steps=100), "--run-dir", run_dir)
    assert trained.returncode == 0, trained.stderr
    # A pipe has no terminal size: COLUMNS and LINES stand in, as shutil.get_terminal_size reads them.
    environment = dict(os.environ, COLUMNS="40", LINES="20")
    result = subprocess.run(rlsup_command("enjoy", run_dir, "--render", "terminal", "--episodes", "1", "--fps", "0"),
                            capture_output=True, text=True, timeout=240, env=environment)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    frames = result.stdout.split("\x1b[H")[1:]
    assert len(frames) > 10
    first = frames[0].splitlines()[:18]
    assert len(first) == 18 and all(line.count("\u2580") == 27 for line in first)  # 210×160 into 36 rows
    assert "\x1b[38;2;" in frames[0] and "\x1b[48;2;" in frames[0]
    assert "\x1b[?25l\x1b[2J" in result.stdout and "\x1b[0m\x1b[?25h" in result.stdout
    assert "mean return" in result.stdout
    assert "over 1 episode\n" in result.stdout  # issue 50 item 12: it said "over 1 episodes"


def test_terminal_render_of_cartpole_without_pygame_names_the_render_extra(tmp_path):
    shadow = tmp_path / "shadow" / "pygame"  # a pygame that cannot be imported stands in for one never installed
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named pygame')\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, specs.loads(cartpole_text(), file="job.toml", default_name="cartpole"))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(rlsup_command("enjoy", run_dir, "--render", "terminal"), capture_output=True, text=True,
                            timeout=120, env=environment)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "rlsup: rendering CartPole-v1 needs pygame, which is not installed: pip install 'rlsup[render]'"]


def test_enjoy_writes_a_cartpole_video_with_pygame(tmp_path):
    """`--render video` end to end: pygame draws CartPole's frames and OpenCV writes an mp4 that reads back."""
    run_dir, video = tmp_path / "run", tmp_path / "cartpole.mp4"
    trained = run_rlsup("run", cartpole_job(tmp_path, total_steps=1_000), "--run-dir", run_dir)
    assert trained.returncode == 0, trained.stderr
    result = run_rlsup("enjoy", run_dir, "--render", "video", "--video", video, "--episodes", "1", "--fps", "0",
                       "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # not even SDL's complaint about a missing display
    length = int(json.loads(result.stdout)["returns"][0])  # CartPole pays 1 per step: the return is the length
    frames, frame = video_start(video)
    assert frame is not None and frame.shape == (400, 600, 3)  # CartPole's rgb_array screen
    assert frames == length  # one frame per step
    assert frame.std() > 0  # a drawing, not a blank screen
