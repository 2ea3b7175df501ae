"""DQN on Atari or MinAtar as a user experiences it: whole-process wall time of `rlsup run` vs stable-baselines3.

Each side runs in a fresh Python process, timed from spawn to exit: imports, env start-up, a fixed
number of agent steps and the final save are all in the figure. rlsup runs four times, with `[dqn] overlap`
and `[job] flush_denormals` each off and on. On Atari both see the same env pipeline (ALE v5, AtariPreprocessing, FIRE on reset,
4-frame stack, clipped rewards) and the Nature CNN; on MinAtar the raw game and rlsup's SmallConvTorso. Adam
at 1e-4, Huber loss, gradient norm 10, batch 32, one gradient step per 4 transitions (at num_envs
N: N/4 gradient steps every batch of N, or one every 4/N batches), and the same torch thread count.
rlsup's final checkpoint holds the replay (its default, which makes the resume exact); SB3's save
holds the model only (its default: saving its replay is a separate call). CPU seconds (user + system)
are printed beside wall seconds: where other work shares the machine they are the steadier comparison.
Each side's count of gradient steps is printed too, to show both did the same work.

    pip install -e '.[bench]'
    python bench/dqn_throughput.py [--game ALE/Pong-v5] [--steps 8000] [--envs 1 8] [--threads 1]
    python bench/dqn_throughput.py --game MinAtar/Breakout-v1 --envs 1 --transitions-per-update 1
    python bench/dqn_throughput.py --variants plain flush     # only those rlsup sides (and SB3)

The result (bench/results_format.py) goes to --out, by default results/dqn-throughput-GAME.json.
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

import results_format  # bench/ beside this script

RLSUP_JOB = """
[job]
name = "bench"
seed = 1
total_steps = {steps}
threads = {threads}
device = "{device}"
flush_denormals = {flush}

[env]
id = "{game}"
num_envs = {num_envs}
{env_settings}

[dqn]
lr = 1e-4
batch_size = 32
learning_starts = {learning_starts}
train_every = {train_every}
gradient_steps = {gradient_steps}
target_update_every = 1000
double = false
loss = "huber"
overlap = {overlap}
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


# The rlsup sides: [dqn] overlap and [job] flush_denormals, each off and on. Flushing leaves the network's
# trajectory as it is wherever no weight's step changes by it (bench/flush_denormals.py checks a game).
VARIANTS = {"plain": {"overlap": False}, "overlap": {"overlap": True}, "flush": {"overlap": False, "flush": True},
            "flush+overlap": {"overlap": True, "flush": True}}

# What the Atari side's env pipeline is in rlsup's job (SB3's is env_throughput.atari_stack); MinAtar needs none.
ATARI_ENV_SETTINGS = 'preset = "atari"\nclip_rewards = true\nepisodic_life = true'


def is_minatar(game: str) -> bool:
    return game.startswith("MinAtar/")


def training_cadence(num_envs: int, per_update: int) -> dict[str, int]:
    """One gradient step per `per_update` transitions, in each library's units (rlsup counts env steps, SB3 batches)."""
    gradient_steps = max(1, num_envs // per_update)
    return {"rlsup_train_every": max(per_update, num_envs), "sb3_train_freq": max(1, per_update // num_envs),
            "gradient_steps": gradient_steps}


class Timing(NamedTuple):
    """One side's whole process: wall and CPU seconds (CPU is steadier on a shared machine) and its gradient steps."""

    wall: float
    cpu: float
    updates: int


def rlsup_timing(arguments: argparse.Namespace, num_envs: int, directory: Path, *, overlap: bool,
                 flush: bool = False) -> Timing:
    cadence = training_cadence(num_envs, arguments.transitions_per_update)
    job = directory / f"rlsup-{num_envs}-{overlap}-{flush}.toml"
    # SB3 trains once its step count exceeds learning_starts, rlsup once it reaches it: one more step here
    # gives both the same number of gradient steps.
    job.write_text(RLSUP_JOB.format(steps=arguments.steps, threads=arguments.threads, device=arguments.device,
                                    game=arguments.game, num_envs=num_envs, overlap=str(overlap).lower(),
                                    flush=str(flush).lower(),
                                    env_settings="" if is_minatar(arguments.game) else ATARI_ENV_SETTINGS,
                                    learning_starts=arguments.learning_starts + 1,
                                    train_every=cadence["rlsup_train_every"],
                                    gradient_steps=cadence["gradient_steps"],
                                    epsilon_end_step=arguments.steps // 10, buffer=arguments.buffer,
                                    log_every=math.gcd(arguments.steps, 1000)))
    run_dir = directory / f"run-{num_envs}-{overlap}-{flush}"
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
            "--device", arguments.device, "--transitions-per-update", str(arguments.transitions_per_update)]


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
    import torch
    from stable_baselines3 import DQN

    torch.set_num_threads(arguments.threads)
    num_envs = arguments.sb3_child
    cadence = training_cadence(num_envs, arguments.transitions_per_update)
    vector, policy_kwargs = sb3_envs(arguments.game, num_envs)
    model = DQN("CnnPolicy", vector, policy_kwargs=policy_kwargs, learning_rate=1e-4, buffer_size=arguments.buffer,
                learning_starts=arguments.learning_starts, batch_size=32, train_freq=cadence["sb3_train_freq"],
                gradient_steps=cadence["gradient_steps"], target_update_interval=1000, exploration_fraction=0.1,
                exploration_final_eps=0.05, max_grad_norm=10.0, device=arguments.device,
                optimize_memory_usage=False, seed=1, verbose=0)
    model.learn(total_timesteps=arguments.steps)
    model.save(arguments.save_to)
    print(model._n_updates)  # gradient steps taken, for the table
    return 0


def sb3_envs(game: str, num_envs: int):
    """SB3's vector env for the game, and its policy's network: the Nature CNN on Atari, rlsup's on MinAtar."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.vec_env import DummyVecEnv

    if is_minatar(game):
        from minatar import gym as minatar_gym
        from peers.sb3_minatar import ChannelsFirst, small_conv_extractor

        minatar_gym.register_envs()
        return (DummyVecEnv([lambda: ChannelsFirst(gym.make(game)) for _ in range(num_envs)]),
                dict(features_extractor_class=small_conv_extractor(), net_arch=[]))
    from env_throughput import atari_stack

    return DummyVecEnv([lambda: gym.wrappers.TransformReward(atari_stack(game), np.sign)
                        for _ in range(num_envs)]), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--steps", type=int, default=8000, help="agent steps (transitions), all envs together")
    parser.add_argument("--learning-starts", type=int, default=2000)
    parser.add_argument("--buffer", type=int, default=20_000)
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--transitions-per-update", type=int, default=4,
                        help="1 is the MinAtar paper's cadence (jobs/minatar-breakout-dqn.toml)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS),
                        help="which rlsup sides to time (default: all)")
    parser.add_argument("--sb3-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--save-to", default="", help=argparse.SUPPRESS)
    results_format.add_out_argument(parser, "results/dqn-throughput-GAME.json")
    arguments = parser.parse_args()
    if arguments.sb3_child:
        return sb3_child(arguments)
    run = results_format.started("bench/dqn_throughput.py")
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        print("stable-baselines3 is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    print(f"{arguments.game}, {arguments.steps} steps (learning from {arguments.learning_starts}), one gradient "
          f"step of batch 32 per {arguments.transitions_per_update} transitions, "
          f"{'rlsup SmallConvTorso' if is_minatar(arguments.game) else 'Nature CNN'}, device {arguments.device}, "
          f"{arguments.threads} torch thread(s); whole-process wall time, start-up and final save included")
    print(f"{'num_envs':>8}  {'side':<15}{'wall s':>8}{'cpu s':>8}{'updates':>9}{'x plain':>9}{'SB3/side':>10}")
    rows = {}
    for num_envs in arguments.envs:
        with tempfile.TemporaryDirectory(prefix="rlsup-dqn-bench-") as directory:
            timings = {name: rlsup_timing(arguments, num_envs, Path(directory), **fields)
                       for name, fields in VARIANTS.items() if name in arguments.variants}
            theirs = sb3_timing(arguments, num_envs, Path(directory))
        assert len({timing.updates for timing in timings.values()}) == 1, timings
        plain = timings.get("plain")
        for name, timing in [*timings.items(), ("stable-baselines3", theirs)]:
            speed_up = f"{plain.wall / timing.wall:>9.2f}" if plain else f"{'':>9}"
            print(f"{num_envs:>8}  {name:<15}{timing.wall:>8.1f}{timing.cpu:>8.1f}{timing.updates:>9}{speed_up}"
                  f"{theirs.wall / timing.wall:>10.2f}", flush=True)
            rows[f"{num_envs}, {name}"] = [timing.wall, timing.cpu, timing.updates,
                                           plain.wall / timing.wall if plain else None, theirs.wall / timing.wall]
    print("x plain: how many times faster than rlsup with both off (today's trajectory); SB3/side: how many times "
          "faster than stable-baselines3 on the same job (goal: >= 1.5 at each num_envs). cpu s is user + system, "
          "which overlap raises by running the learner beside the envs")
    write_result(arguments, run, rows)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, rows: dict[str, list]) -> None:
    """Each num_envs and side's whole process, as printed."""
    column = results_format.column
    columns = [column("wall", "s", 1), column("CPU (user + system)", "CPU s", 1), column("gradient steps", "count"),
               column("plain rlsup / this side", "x", 2), column("stable-baselines3 / this side", "x", 2)]
    said = (f"{arguments.steps:,} steps (learning from {arguments.learning_starts:,}), one gradient step of batch 32 per "
            f"{arguments.transitions_per_update} transitions, device {arguments.device}, {arguments.threads} torch "
            "thread(s); each side a whole process timed from spawn to exit, start-up and final save included.")
    table = results_format.measurement(f"{arguments.game}, whole processes", "num_envs, side", columns, rows, said)
    against = [f"{values[4]:.2f} times as long as plain rlsup's at num_envs = {name.split(',')[0]}"
               for name, values in rows.items() if name.endswith(", plain")]
    finding = f"stable-baselines3's whole process took {', and '.join(against)}." if against else None
    results_format.write_figures(arguments, run, f"dqn-throughput-{results_format.game_word(arguments.game)}",
                                 f"Whole DQN processes on {arguments.game}: rlsup against stable-baselines3", [table],
                                 finding)


if __name__ == "__main__":
    sys.exit(main())
