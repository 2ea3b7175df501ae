"""rlsup enjoy: play a trained policy greedily from a run directory and its checkpoint."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import numpy as np

from rlsup.run import files as runfiles
from rlsup.algos.contract import Policy

RENDER_EXTRA = "pip install 'rlsup[render]'"


class RenderUnavailable(RuntimeError):
    """Frames were asked for, but what draws them is not installed."""


def require_renderer(env) -> None:
    """Say before any checkpoint loads that frames cannot be drawn: the ALE draws its own, MuJoCo's envs need
    an OpenGL backend that draws off screen, the classic-control envs (CartPole…) need pygame, which no
    required dependency brings."""
    if env.preset == "atari":
        return
    if env.source == "fused":
        raise RenderUnavailable(f"the fused game {env.id!r} draws no frames: play it without --render")
    from rlsup.algos.envs.mujoco_render import is_mujoco_env, offscreen_problem
    from rlsup.algos.envs.sources import registered_spec

    registered_spec(env)  # the env's own modules imported, so that its id is known
    if is_mujoco_env(env.id):
        problem = offscreen_problem(env.id)
        if problem is not None:
            raise RenderUnavailable(problem)
        return
    # Frames are drawn off screen (render_mode "rgb_array"): without a display SDL's default video
    # driver prints "XDG_RUNTIME_DIR is invalid" to the user's terminal, the dummy driver does not.
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    # Nor does enjoy play sound, which pygame.init() opens anyway: on a machine with ALSA's library but no sound
    # card, ALSA printed seven lines of "cannot find card '0'" to the user's terminal.
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    try:
        import pygame  # noqa: F401
    except ImportError:
        raise RenderUnavailable(f"rendering {env.id} needs pygame, which is not installed: {RENDER_EXTRA}") from None


class VideoRecorder:
    """Writes rendered RGB frames to an mp4 file with OpenCV, opened on the first frame."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.writer = Path(path), fps, None

    def __call__(self, frame: np.ndarray | None) -> None:
        if frame is None:
            return
        import cv2

        from rlsup.frames import video_frame

        frame = video_frame(frame)  # OpenCV takes bytes only: MinAtar's float frames raised "depth is 6 (CV_64F)"
        if self.writer is None:
            height, width = frame.shape[:2]
            self.writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (width, height))
        self.writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.release()


def load_policy(run_dir: Path, which: str = "latest", report: Callable[[str], None] = lambda line: None,
                ) -> tuple[Policy, object]:
    """The greedy policy of a checkpoint, built from the run's own job.toml (works on a copied run).

    Its algorithm builds it (registry.Algorithm.policy_from_checkpoint). report hears which newer
    checkpoints `latest` fell back past, and why.
    """
    from rlsup.spec import registry

    spec, trainer_state, entry = read_trainer_state(run_dir, which, report)
    return registry.get(spec.job.algo).policy_from_checkpoint(spec, trainer_state), entry


def read_trainer_state(run_dir: Path, which: str = "latest", report: Callable[[str], None] = lambda line: None,
                       ) -> tuple[object, dict, object]:
    """(the run's spec, the trainer state of a checkpoint, its entry): what enjoy and export build policies from."""
    from rlsup.checkpoint.choose import ROTATED_TRIES, latest_choice, resolve
    from rlsup.checkpoint.manifest import CheckpointError, CheckpointProblem
    from rlsup.checkpoint.store import load_checkpoint

    spec = runfiles.read_run_spec(run_dir)  # the caller has put the env's own modules on sys.path
    for _ in range(ROTATED_TRIES):
        if which == "latest":
            choice = latest_choice(run_dir)
            entry = choice.entry
            if choice.skipped_message():
                report(choice.skipped_message())
        else:
            entry = resolve(run_dir, which)
        try:
            # `latest` and `best` resolve to a checkpoint just checksummed; a step or a path has not. Installed
            # checkpoint files are never rewritten, only deleted, so what is read whole is what verified.
            _, state = load_checkpoint(entry.path, verify=which not in ("latest", "best"))
            return spec, state["trainer"], entry
        except CheckpointError:
            if which != "latest" or entry.path.is_dir():
                raise
            # Rotated away while read by the run's worker (keep = 1, say): the newest again.
    raise CheckpointProblem(f"the checkpoints of {run_dir} were rotated away {ROTATED_TRIES} times while read: "
                            "its worker replaces them faster than they can be loaded; try again")


def frame_rate(env_id: str) -> float:
    """The env's own frames per second (its metadata's render_fps), else 30."""
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    from rlsup.algos.envs.mujoco_render import is_mujoco_env, mujoco_frame_rate

    try:
        if is_mujoco_env(env_id):
            return mujoco_frame_rate(env_id)
        creator = load_env_creator(gymnasium.spec(env_id).entry_point)
        return float(getattr(creator, "metadata", {}).get("render_fps") or DEFAULT_FPS)
    except Exception:  # any env the registry cannot describe still plays, at the usual rate
        return DEFAULT_FPS


DEFAULT_FPS = 30.0


def frame_sink(spec, video: Path | None, terminal: bool, fps: float | None):
    """Where frames go: an mp4 file, the terminal, or nowhere (None: nothing is rendered)."""
    if video:
        return VideoRecorder(video, fps=fps or frame_rate(spec.env.id))
    if terminal:
        from rlsup.frames import TerminalPlayer

        return TerminalPlayer(frame_rate(spec.env.id) if fps is None else fps)
    return None


def enjoy(run_dir: Path, *, which: str = "latest", episodes: int = 5, seed: int | None = None,
          video: Path | None = None, terminal: bool = False, fps: float | None = None,
          report: Callable[[str], None] = print,
          started: Callable[[], None] = lambda: None) -> tuple[list[float], object]:
    """Play episodes and report each return; returns the unclipped scores and the checkpoint played.

    video writes the frames to an mp4 file; terminal draws them in place (fps: None is the env's own).
    started is called once everything is loaded and the env made, as the first episode begins.
    """
    from rlsup.algos.device import configure_torch
    from rlsup.algos.evaluate import play_episodes

    spec = runfiles.read_run_spec(run_dir)
    if video or terminal:
        require_renderer(spec.env)
    # The run's own thread count and float mode, as its worker trained: torch's default of one thread per core
    # gains nothing on one observation at a time, and its threads spin against any other busy process
    # (measured on 2 busy cores: a Pong episode took 25 s of convolutions with 2 threads, 0.8 s with 1).
    configure_torch(spec)
    policy, entry = load_policy(run_dir, which, report)
    report(f"{entry.path.name}: step {entry.step}, fingerprint {entry.fingerprint[:12]}")
    sink = frame_sink(spec, video, terminal, fps)

    def on_episode(number: int, score: float, length: int) -> None:
        report(f"episode {number}: return {score:g} ({length} steps)")

    try:
        returns = play_episodes(policy, spec.env, seed=spec.job.seed if seed is None else seed,
                                episodes=episodes, on_episode=on_episode, on_frame=sink, started=started)
        return returns, entry
    finally:
        if sink:
            sink.close()
