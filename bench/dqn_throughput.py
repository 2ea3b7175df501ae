"""DQN steps/s on Atari: the rlsup worker vs stable-baselines3's DQN with the same settings, side by side.

Both learners see the same env pipeline (ALE v5, AtariPreprocessing, 4-frame stack), the Nature CNN,
train every 4 steps with batch 32, and the same torch thread count. Only the steps after learning
starts are timed, so the figure is the training loop's rate, not the warm-up's.

    pip install -e '.[bench]'
    python bench/dqn_throughput.py [--game ALE/Pong-v5] [--steps 6000] [--learning-starts 2000] [--threads 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

from rlsup import runfiles
from rlsup import spec as specs


def rlsup_rate(arguments: argparse.Namespace, directory: Path) -> float:
    """Steps/s of the rlsup worker between learning_starts and the budget, from its own metrics."""
    from rlsup import worker

    spec = specs.JobSpec()
    spec = spec.replace("job", total_steps=arguments.learning_starts + arguments.steps, threads=arguments.threads,
                        device=arguments.device, name="bench")
    spec = spec.replace("env", id=arguments.game, preset="atari", clip_rewards=True, episodic_life=True)
    spec = spec.replace("dqn", batch_size=32, learning_starts=arguments.learning_starts, train_every=4,
                        target_update_every=1000, double=False, loss="mse", max_grad_norm=0.0)
    spec = spec.replace("checkpoint", every_steps=0).replace("log", every_steps=500)
    spec = dataclasses.replace(spec, replay=(specs.ReplaySection(capacity=arguments.buffer),))
    run_dir = directory / "rlsup-run"
    run_dir.mkdir()
    runfiles.write_run_spec(run_dir, spec)
    worker.run(run_dir)
    # train lines carry wall time; learning_starts is a multiple of the log interval, so one falls on it
    stamps = {record["step"]: record["t"] for record in runfiles.read_metrics(run_dir) if record["kind"] == "train"}
    first, last = arguments.learning_starts, spec.job.total_steps
    return (last - first) / (stamps[last] - stamps[first])


def stable_baselines_rate(arguments: argparse.Namespace) -> float:
    import ale_py
    import gymnasium as gym
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback

    gym.register_envs(ale_py)
    env = gym.make(arguments.game, frameskip=1, repeat_action_probability=0.0)
    env = FrameStackObservation(AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                                   grayscale_obs=True, scale_obs=False), 4)
    marks = {}

    class Clock(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps == arguments.learning_starts:
                marks["start"] = time.perf_counter()
            return True

    model = DQN("CnnPolicy", env, learning_rate=1e-4, buffer_size=arguments.buffer,
                learning_starts=arguments.learning_starts, batch_size=32, train_freq=4, gradient_steps=1,
                target_update_interval=1000, device=arguments.device if arguments.device != "auto" else "auto",
                optimize_memory_usage=False, seed=1, verbose=0)
    model.learn(total_timesteps=arguments.learning_starts + arguments.steps, callback=Clock())
    return arguments.steps / (time.perf_counter() - marks["start"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--steps", type=int, default=6000, help="timed steps after learning starts")
    parser.add_argument("--learning-starts", type=int, default=2000)
    parser.add_argument("--buffer", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "auto"])
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    with tempfile.TemporaryDirectory() as directory:
        ours = rlsup_rate(arguments, Path(directory))
    try:
        theirs = stable_baselines_rate(arguments)
    except ImportError:
        print("stable-baselines3 is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    print(f"{arguments.game}, train every 4, batch 32, Nature CNN, device {arguments.device}, "
          f"{arguments.threads} thread(s), {arguments.steps} timed steps")
    print(f"{'':24}{'steps/s':>10}")
    print(f"{'rlsup':24}{ours:>10.1f}")
    print(f"{'stable-baselines3':24}{theirs:>10.1f}")
    print(f"ratio rlsup / sb3: {ours / theirs:.2f} (budget: >= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
