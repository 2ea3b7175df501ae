"""DQN on Atari as a user experiences it: whole-process wall time of `rlsup run` vs stable-baselines3.

Each side runs in a fresh Python process, timed from spawn to exit: imports, env start-up, a fixed
number of agent steps and the final save are all in the figure. Both see the same env pipeline
(ALE v5, AtariPreprocessing, FIRE on reset, 4-frame stack, clipped rewards), the Nature CNN, Adam
at 1e-4, Huber loss, gradient norm 10, batch 32, one gradient step per 4 transitions (at num_envs
N: N/4 gradient steps every batch of N, or one every 4/N batches), and the same torch thread count.
rlsup's final checkpoint holds the replay (its default, which makes the resume exact); SB3's save
holds the model only (its default: saving its replay is a separate call). CPU seconds (user + system)
are printed beside wall seconds: where other work shares the machine they are the steadier comparison.
Each side's count of gradient steps is printed too, to show both did the same work.

    pip install -e '.[bench]'
    python bench/dqn_throughput.py [--game ALE/Pong-v5] [--steps 8000] [--envs 1 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

RLSUP_JOB = """
[job]
name = "bench"
seed = 1
total_steps = {steps}
threads = {threads}
device = "{device}"

[env]
id = "{game}"
preset = "atari"
num_envs = {num_envs}
clip_rewards = true
episodic_life = true

[dqn]
lr = 1e-4
batch_size = 32
learning_starts = {learning_starts}
train_every = {train_every}
gradient_steps = {gradient_steps}
target_update_every = 1000
double = false
loss = "huber"
max_grad_norm = 10.0
epsilon_end = 0.05
epsilon_end_step = {epsilon_end_step}

[[replay]]
capacity = {buffer}

[checkpoint]
every_steps = 0

[log]
every_steps = {log_every}
"""


def training_cadence(num_envs: int) -> dict[str, int]:
    """One gradient step per 4 transitions, in each library's units (rlsup counts env steps, SB3 batches)."""
    gradient_steps = max(1, num_envs // 4)
    return {"rlsup_train_every": max(4, num_envs), "sb3_train_freq": max(1, 4 // num_envs),
            "gradient_steps": gradient_steps}


class Timing(NamedTuple):
    """One side's whole process: wall and CPU seconds (CPU is steadier on a shared machine) and its gradient steps."""

    wall: float
    cpu: float
    updates: int


def rlsup_timing(arguments: argparse.Namespace, num_envs: int, directory: Path) -> Timing:
    cadence = training_cadence(num_envs)
    job = directory / f"rlsup-{num_envs}.toml"
    # SB3 trains once its step count exceeds learning_starts, rlsup once it reaches it: one more step here
    # gives both the same number of gradient steps.
    job.write_text(RLSUP_JOB.format(steps=arguments.steps, threads=arguments.threads, device=arguments.device,
                                    game=arguments.game, num_envs=num_envs,
                                    learning_starts=arguments.learning_starts + 1,
                                    train_every=cadence["rlsup_train_every"],
                                    gradient_steps=cadence["gradient_steps"],
                                    epsilon_end_step=arguments.steps // 10, buffer=arguments.buffer,
                                    log_every=math.gcd(arguments.steps, 1000)))
    run_dir = directory / f"run-{num_envs}"
    wall, cpu, _ = timed([sys.executable, "-m", "rlsup.cli", "run", str(job), "--run-dir", str(run_dir)])
    return Timing(wall, cpu, rlsup_updates(run_dir / "metrics.jsonl"))


def rlsup_updates(metrics: Path) -> int:
    """Gradient steps taken, from the last `train` line (the job logs at its final step)."""
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    return [record for record in records if record["kind"] == "train"][-1]["updates"]


def sb3_timing(arguments: argparse.Namespace, num_envs: int, directory: Path) -> Timing:
    wall, cpu, output = timed([sys.executable, __file__, "--sb3-child", str(num_envs), "--save-to",
                               str(directory / "sb3.zip"), *passed_on(arguments)])
    return Timing(wall, cpu, int(output.split()[-1]))


def passed_on(arguments: argparse.Namespace) -> list[str]:
    return ["--game", arguments.game, "--steps", str(arguments.steps), "--learning-starts",
            str(arguments.learning_starts), "--buffer", str(arguments.buffer), "--threads", str(arguments.threads),
            "--device", arguments.device]


def timed(command: list[str]) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of one child process, and its stdout."""
    used_before = children_cpu_seconds()
    began = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return seconds, children_cpu_seconds() - used_before, result.stdout


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sb3_child(arguments: argparse.Namespace) -> int:
    """The stable-baselines3 side, in its own process so its imports and start-up are timed too."""
    import gymnasium as gym
    import numpy as np
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.vec_env import DummyVecEnv

    from env_throughput import atari_stack

    torch.set_num_threads(arguments.threads)
    num_envs = arguments.sb3_child
    cadence = training_cadence(num_envs)
    vector = DummyVecEnv([lambda: gym.wrappers.TransformReward(atari_stack(arguments.game), np.sign)
                          for _ in range(num_envs)])
    model = DQN("CnnPolicy", vector, learning_rate=1e-4, buffer_size=arguments.buffer,
                learning_starts=arguments.learning_starts, batch_size=32, train_freq=cadence["sb3_train_freq"],
                gradient_steps=cadence["gradient_steps"], target_update_interval=1000, exploration_fraction=0.1,
                exploration_final_eps=0.05, max_grad_norm=10.0, device=arguments.device,
                optimize_memory_usage=False, seed=1, verbose=0)
    model.learn(total_timesteps=arguments.steps)
    model.save(arguments.save_to)
    print(model._n_updates)  # gradient steps taken, for the table
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--steps", type=int, default=8000, help="agent steps (transitions), all envs together")
    parser.add_argument("--learning-starts", type=int, default=2000)
    parser.add_argument("--buffer", type=int, default=20_000)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sb3-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--save-to", default="", help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.sb3_child:
        return sb3_child(arguments)
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        print("stable-baselines3 is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    print(f"{arguments.game}, {arguments.steps} steps (learning from {arguments.learning_starts}), one gradient "
          f"step of batch 32 per 4 transitions, Nature CNN, device {arguments.device}, {arguments.threads} "
          f"torch thread(s); whole-process wall time, start-up and final save included")
    print(f"{'num_envs':>8}{'rlsup s':>10}{'SB3 s':>10}{'rlsup cpu s':>13}{'SB3 cpu s':>11}{'rlsup updates':>15}"
          f"{'SB3 updates':>13}{'SB3/rlsup':>11}{'(cpu)':>7}")
    for num_envs in arguments.envs:
        with tempfile.TemporaryDirectory(prefix="rlsup-dqn-bench-") as directory:
            ours = rlsup_timing(arguments, num_envs, Path(directory))
            theirs = sb3_timing(arguments, num_envs, Path(directory))
        print(f"{num_envs:>8}{ours.wall:>10.1f}{theirs.wall:>10.1f}{ours.cpu:>13.1f}{theirs.cpu:>11.1f}"
              f"{ours.updates:>15}{theirs.updates:>13}{theirs.wall / ours.wall:>11.2f}{theirs.cpu / ours.cpu:>7.2f}",
              flush=True)
    print("SB3/rlsup is how many times faster rlsup finishes the same job (goal: >= 1.5 at each num_envs); "
          "(cpu) is the same ratio of CPU seconds, steadier where other work shares the machine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
