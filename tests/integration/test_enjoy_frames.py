"""`enjoy`'s frame sinks on every example env's own frames: MinAtar's are float64 in [0, 1] and 10×10."""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from rlsup_testing import video_start

from rlsup import spec as specs
from rlsup.algos.envs.training import make_env
from rlsup.enjoy import VideoRecorder
from rlsup.frames import TerminalPlayer

JOBS = Path(__file__).resolve().parents[2] / "jobs"
EXAMPLES = ["cartpole-dqn", "minatar-breakout-dqn", "lunarlander-dqn", "pong-dqn"]
CELL = re.compile(r"\x1b\[38;2;(\d+);(\d+);(\d+)m\x1b\[48;2;(\d+);(\d+);(\d+)m\u2580")


def example_frames(name: str, count: int = 12) -> list[np.ndarray]:
    """Frames the example's env renders, as `enjoy` receives them, after a few random steps."""
    spec = specs.loads((JOBS / f"{name}.toml").read_text(), file=f"{name}.toml")
    env = make_env(spec.env, seed=1, render_mode="rgb_array")
    env.reset()
    frames = [env.render()]
    for step in range(count - 1):
        if env.step(step % 2).done:  # CartPole can fall within a dozen steps
            env.reset()
        frames.append(env.render())
    env.close()
    return frames


def drawn_pixels(text: str) -> np.ndarray:
    """The (rows, columns, 3) pixels of one drawn terminal frame, read back from its escape codes."""
    rows = []
    for line in text.splitlines():
        cells = [tuple(map(int, match)) for match in CELL.findall(line)]
        if cells:
            rows += [[cell[:3] for cell in cells], [cell[3:] for cell in cells]]
    return np.array(rows, dtype=np.uint8)


def as_bytes(frame: np.ndarray) -> np.ndarray:
    """The frame's brightness on 0-255, whatever its dtype (MinAtar draws floats on [0, 1])."""
    return frame * 255 if frame.dtype.kind == "f" else frame.astype(float)


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_terminal_draws_each_example_envs_frames(name: str) -> None:
    frame = example_frames(name, count=1)[0]
    stream = io.StringIO()
    player = TerminalPlayer(fps=0, stream=stream, terminal_size=lambda: (80, 24))
    player(frame)
    player.close()
    pixels = drawn_pixels(stream.getvalue())
    height, width = frame.shape[:2]
    assert pixels.max() > 0, "an all-black box"
    # Enlarged to the terminal when small (10×10 is 10 cells of 80), shrunk when large: the aspect is kept.
    assert pixels.shape[0] >= 40 or pixels.shape[1] >= 70, pixels.shape
    assert abs(pixels.shape[1] / pixels.shape[0] - width / height) < 0.15
    # The same picture: its brightness, pixel for pixel on the frame's own grid, within rounding.
    rows = (np.arange(height) * pixels.shape[0] / height).astype(int)
    columns = (np.arange(width) * pixels.shape[1] / width).astype(int)
    if len(pixels) >= height:
        assert np.abs(pixels[rows][:, columns].astype(float) - as_bytes(frame)[..., :3]).max() <= 1
    else:
        assert abs(pixels.astype(float).mean() - as_bytes(frame)[..., :3].mean()) < 20


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_video_holds_each_example_envs_frames(tmp_path: Path, name: str) -> None:
    import cv2

    frames = example_frames(name)
    video = tmp_path / f"{name}.mp4"
    recorder = VideoRecorder(video, fps=30)
    for frame in frames:
        recorder(frame)
    recorder.close()
    count, first = video_start(video)
    assert first is not None and count == len(frames)
    assert first.shape[0] >= frames[0].shape[0] and min(first.shape[:2]) >= 100, first.shape
    assert first.max() > 0 and first.std() > 0  # a picture, not a black screen
    height, width = frames[0].shape[:2]
    shrunk = cv2.resize(first, (width, height), interpolation=cv2.INTER_AREA)[..., ::-1]  # BGR back to RGB
    assert np.abs(shrunk.astype(float) - as_bytes(frames[0])[..., :3]).mean() < 25  # mp4's loss, not another image
