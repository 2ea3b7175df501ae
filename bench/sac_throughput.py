"""SAC as a user experiences it: whole-process wall time of `rlsup run` vs stable-baselines3's SAC on the same job.

Each side runs in a fresh Python process, timed from spawn to exit: imports, env start-up, a fixed number of
agent steps and the final save are all in the figure. Both train the same networks (by default a 256-256 ReLU
policy with mean and log-std heads and two 256-256 Q-networks; --hidden 64 64 for smaller ones), Adam at one
learning rate for policy, critics and temperature, batch 256, one gradient step (critics, policy and
temperature each) per env step after learning_starts, target networks moved by tau 0.005 every step, one env
(N = 1) and the same torch thread count. rlsup's final checkpoint holds the replay (its default, which makes a
resume exact); SB3's save holds the model only. CPU seconds (user + system) are printed beside wall seconds:
where other work shares the machine they are the steadier comparison.

    pip install -e '.[bench]'
    python bench/sac_throughput.py [--env Pendulum-v1] [--steps 6000] [--learning-starts 1000] [--threads 1]

The result (bench/results_format.py) goes to --out, by default results/sac-throughput-ENV.json.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import results_format  # bench/ beside this script
from dqn_throughput import Timing, rlsup_updates, timed

RLSUP_JOB = """
[job]
name = "bench"
algo = "sac"
seed = 1
total_steps = {steps}
threads = {threads}
device = "{device}"

[env]
id = "{env}"

[sac]
lr_actor = {lr}
lr_critic = {lr}
lr_temperature = {lr}
batch_size = 256
learning_starts = {learning_starts}
policy_every = 1
tau = 0.005
hidden_sizes = {hidden}

[[replay]]
capacity = {steps}

[checkpoint]
every_steps = 0

[log]
every_steps = {steps}
"""


def rlsup_timing(arguments: argparse.Namespace, directory: Path) -> Timing:
    job = directory / "rlsup.toml"
    job.write_text(RLSUP_JOB.format(steps=arguments.steps, threads=arguments.threads, device=arguments.device,
                                    env=arguments.env, lr=arguments.lr, learning_starts=arguments.learning_starts,
                                    hidden=list(arguments.hidden)))
    run_dir = directory / "run"
    wall, cpu, _ = timed([sys.executable, "-m", "rlsup.cli", "run", str(job), "--run-dir", str(run_dir)])
    return Timing(wall, cpu, rlsup_updates(run_dir / "metrics.jsonl"))


def sb3_timing(arguments: argparse.Namespace, directory: Path) -> Timing:
    wall, cpu, output = timed([sys.executable, __file__, "--sb3-child", "--save-to", str(directory / "sb3.zip"),
                               "--env", arguments.env, "--steps", str(arguments.steps), "--learning-starts",
                               str(arguments.learning_starts), "--threads", str(arguments.threads), "--device",
                               arguments.device, "--lr", str(arguments.lr),
                               "--hidden", *map(str, arguments.hidden)])
    return Timing(wall, cpu, int(output.split()[-1]))


def sb3_child(arguments: argparse.Namespace) -> int:
    """The stable-baselines3 side, in its own process so its imports and start-up are timed too."""
    import torch
    from stable_baselines3 import SAC

    torch.set_num_threads(arguments.threads)
    # SB3 trains once its step count exceeds learning_starts, rlsup once it reaches it: one fewer here gives
    # both the same number of gradient steps.
    model = SAC("MlpPolicy", arguments.env, learning_rate=arguments.lr, buffer_size=arguments.steps,
                learning_starts=arguments.learning_starts - 1, batch_size=256, tau=0.005, gamma=0.99, train_freq=1,
                gradient_steps=1, ent_coef="auto", target_update_interval=1,
                policy_kwargs={"net_arch": list(arguments.hidden)}, device=arguments.device, seed=1, verbose=0)
    model.learn(total_timesteps=arguments.steps)
    model.save(arguments.save_to)
    print(model._n_updates)  # gradient steps taken, for the table
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=6000, help="agent steps")
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="both sides' hidden layers")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sb3-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--save-to", default="", help=argparse.SUPPRESS)
    results_format.add_out_argument(parser, "results/sac-throughput-ENV.json")
    arguments = parser.parse_args()
    if arguments.sb3_child:
        return sb3_child(arguments)
    run = results_format.started("bench/sac_throughput.py")
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        print("stable-baselines3 is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    print(f"{arguments.env}, {arguments.steps} steps (learning from {arguments.learning_starts}), one gradient step "
          f"of batch 256 per step, {'-'.join(map(str, arguments.hidden))} networks, device {arguments.device}, "
          f"{arguments.threads} torch thread(s); whole-process wall time, start-up and final save included")
    with tempfile.TemporaryDirectory(prefix="rlsup-sac-bench-") as directory:
        timings = {"rlsup": rlsup_timing(arguments, Path(directory)),
                   "stable-baselines3": sb3_timing(arguments, Path(directory))}
    theirs = timings["stable-baselines3"]
    print(f"{'side':<18}{'wall s':>8}{'cpu s':>8}{'updates':>9}{'SB3/side':>10}")
    rows = {}
    for name, timing in timings.items():
        print(f"{name:<18}{timing.wall:>8.1f}{timing.cpu:>8.1f}{timing.updates:>9}{theirs.wall / timing.wall:>10.2f}")
        rows[name] = [timing.wall, timing.cpu, timing.updates, theirs.wall / timing.wall]
    print("SB3/side: how many times faster than stable-baselines3 on the same job (goal: >= 1.5)")
    write_result(arguments, run, rows)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, rows: dict[str, list]) -> None:
    column = results_format.column
    columns = [column("wall", "s", 1), column("CPU (user + system)", "CPU s", 1), column("gradient steps", "count"),
               column("stable-baselines3 / this side", "x", 2)]
    said = (f"{arguments.steps:,} steps (learning from {arguments.learning_starts:,}), one gradient step of batch 256 "
            f"per step, {'-'.join(map(str, arguments.hidden))} networks, device {arguments.device}, "
            f"{arguments.threads} torch thread(s); each side a whole process timed from spawn to exit, start-up and "
            "final save included.")
    table = results_format.measurement(f"{arguments.env}, whole processes", "side", columns, rows, said)
    finding = f"stable-baselines3's whole process took {rows['rlsup'][3]:.2f} times as long as rlsup's."
    width = "" if list(arguments.hidden) == [256, 256] else "-" + "-".join(map(str, arguments.hidden))
    results_format.write_figures(arguments, run, f"sac-throughput-{results_format.game_word(arguments.env)}{width}",
                                 f"Whole SAC processes on {arguments.env}: rlsup against stable-baselines3", [table],
                                 finding)


if __name__ == "__main__":
    sys.exit(main())
