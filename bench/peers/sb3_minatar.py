"""The peer's curve on MinAtar: stable-baselines3's A2C, PPO or DQN on rlsup's MinAtar network, as a result.

The result (bench/results_format.py) holds the paper's measure (the mean return of the last 100 training
episodes) at the paper's marks, as bench/minatar_learning.py measures rlsup's (one frame = one env step,
counted over all envs as rlsup does); that bench prints it beside rlsup's with --peer NAME.

    pip install -e '.[bench,minatar]'
    python bench/peers/sb3_minatar.py --game Breakout --algo a2c --frames 2000000 --seeds 1-3

The network is rlsup's for 10x10 images (network "auto"): one 3x3 convolution with 16 channels and 128
hidden units, the MinAtar paper's, with linear policy and value heads on those 128 features. A2C keeps
stable-baselines3's defaults (Mnih et al. 2016's settings: 5-step updates, RMSProp lr 7e-4, entropy 0.01)
on 16 envs, as rlsup's V-trace example acts with 16; PPO takes the MinAtar settings of PureJaxRL/gymnax
(128-step rollouts, 4 epochs of 8 minibatches, lr 5e-4 decaying to 0, GAE 0.95, clip 0.2) on 16 envs.
--entropy-cost sets either's ent_coef (0.01 by default, both libraries' and IMPALA's). DQN takes the MinAtar
paper's settings (its examples/dqn.py, as jobs/minatar-dqn.toml does) on one env: replay 100,000, batch 32, an
update every frame after 5,000, the target copied every 1,000, Huber loss, no gradient clipping, epsilon 1 to
0.1 (stable-baselines3 anneals it from step 0, over the paper's 5,000 + 100,000 frames), and the paper's
centered RMSProp (lr 2.5e-4, alpha 0.95, eps 0.01); --adam LR and --n-steps N give it a job file's Adam
and n-step targets instead (DQN only: the actor-critics refuse them), and --version v0 the full action set
(jobs/minatar-dqn.toml's Breakout). The --out file (by default results/peer-sb3-ALGO-GAME-FRAMES.json, with
any setting changed from its default in the name) is rewritten every 100,000 frames, so a long run can be read
before it ends: a seed's marks beyond the frames it has reached are empty until it reaches them.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/, for the helpers below
import results_format  # noqa: E402
from learning_seeds import parse_seeds  # noqa: E402
from minatar_paper import marks_for, moving_average_at  # noqa: E402

ENVS = 16


class ChannelsFirst(gym.ObservationWrapper):
    """MinAtar's (10, 10, C) bool image as (C, 10, 10) float32, as rlsup's networks read it."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        height, width, channels = env.observation_space.shape
        self.observation_space = gym.spaces.Box(0.0, 1.0, (channels, height, width), np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.transpose(observation, (2, 0, 1)), dtype=np.float32)


def small_conv_extractor():
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

    from rlsup.algos.nets import SmallConvTorso

    class SmallConv(BaseFeaturesExtractor):
        """rlsup's own SmallConvTorso (algos/nets.py), so that the peer's network is rlsup's, not a copy."""

        def __init__(self, observation_space: gym.spaces.Box):
            super().__init__(observation_space, features_dim=128)
            self.torso = SmallConvTorso(*observation_space.shape)

        def forward(self, observations: torch.Tensor) -> torch.Tensor:
            return self.torso(observations)

    return SmallConv


def make_model(algo: str, game_id: str, seed: int, entropy_cost: float, frames: int, adam_lr: float | None,
               n_steps: int):
    import stable_baselines3
    from minatar import gym as minatar_gym
    from stable_baselines3.common.env_util import make_vec_env

    minatar_gym.register_envs()
    envs = make_vec_env(game_id, n_envs=1 if algo == "dqn" else ENVS, seed=seed,
                        wrapper_class=ChannelsFirst)
    policy_kwargs = dict(features_extractor_class=small_conv_extractor(), net_arch=[])
    if algo == "dqn":
        if adam_lr is None:  # the paper's optimizer; else stable-baselines3's own, Adam
            policy_kwargs.update(optimizer_class=torch.optim.RMSprop,
                                 optimizer_kwargs=dict(alpha=0.95, eps=0.01, centered=True))
        return stable_baselines3.DQN("CnnPolicy", envs, seed=seed, device="cpu", policy_kwargs=policy_kwargs,
                                     learning_rate=2.5e-4 if adam_lr is None else adam_lr, n_steps=n_steps,
                                     buffer_size=100_000, learning_starts=5_000,
                                     batch_size=32, gamma=0.99, train_freq=1, gradient_steps=1,
                                     target_update_interval=1_000, exploration_initial_eps=1.0,
                                     exploration_final_eps=0.1, exploration_fraction=105_000 / frames,
                                     max_grad_norm=float("inf"), optimize_memory_usage=False)
    if algo == "a2c":
        return stable_baselines3.A2C("CnnPolicy", envs, seed=seed, device="cpu", policy_kwargs=policy_kwargs,
                                     ent_coef=entropy_cost)
    return stable_baselines3.PPO("CnnPolicy", envs, seed=seed, device="cpu", policy_kwargs=policy_kwargs,
                                 n_steps=128, batch_size=ENVS * 128 // 8, n_epochs=4, gae_lambda=0.95,
                                 clip_range=0.2, ent_coef=entropy_cost, vf_coef=0.5, max_grad_norm=0.5,
                                 learning_rate=lambda remaining: 5e-4 * remaining)


PROGRESS_FRAMES = 100_000


def episode_recorder(episodes: list, progress):
    from stable_baselines3.common.callbacks import BaseCallback

    class Recorder(BaseCallback):
        """(frames, return) of every finished training episode, from the Monitor wrapper make_vec_env adds;
        progress() every PROGRESS_FRAMES frames."""

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    episodes.append((self.num_timesteps, float(info["episode"]["r"])))
            if self.num_timesteps % PROGRESS_FRAMES < self.training_env.num_envs:
                progress()
            return True

    return Recorder()


def train(arguments: argparse.Namespace, game_id: str, seed: int, progress) -> dict:
    """One seed's run; progress(run so far) every PROGRESS_FRAMES frames."""
    torch.set_num_threads(1)  # as rlsup's jobs run ([job] threads = 1)
    model = make_model(arguments.algo, game_id, seed, arguments.entropy_cost, arguments.frames,
                       arguments.adam, arguments.n_steps)
    run: dict = {"episodes": [], "wall_s": 0.0, "frames": 0}
    started = time.monotonic()

    def report() -> None:
        run["wall_s"], run["frames"] = time.monotonic() - started, model.num_timesteps
        progress(run)

    model.learn(total_timesteps=arguments.frames, callback=episode_recorder(run["episodes"], report))
    report()
    return run


def changed_settings(arguments: argparse.Namespace) -> list[str]:
    """The settings given away from their defaults, as words for the result's file name."""
    return ([arguments.version] if arguments.version != "v1" else []) \
        + ([f"entropy-{arguments.entropy_cost:g}"] if arguments.entropy_cost != 0.01 else []) \
        + ([f"adam-{arguments.adam:g}"] if arguments.adam is not None else []) \
        + ([f"{arguments.n_steps}-step"] if arguments.n_steps > 1 else []) + [frames_word(arguments.frames)]


def frames_word(frames: int) -> str:
    """5000000 -> '5m', 900000 -> '900k'."""
    return f"{frames // 1_000_000}m" if frames % 1_000_000 == 0 else f"{frames // 1000}k"


def result_tables(game: str, game_id: str, runs: dict[int, dict], frames: int) -> list[dict]:
    """The paper's measure at the paper's marks, each seed's up to the frames it has reached, and wall times."""
    def value(run: dict, mark: int) -> float | None:
        return moving_average_at(run["episodes"], mark) if mark <= run["frames"] else None

    marks = [results_format.mark(mark, {seed: value(run, mark) for seed, run in runs.items()})
             for mark in marks_for(game, frames)]
    return [{"group": game, "env": game_id, "measure": "training_mean_100", "marks": marks},
            {"group": game, "env": game_id, "measure": "wall_s",
             "marks": [results_format.mark(None, {seed: run["wall_s"] for seed, run in runs.items()})]}]


def dqn_settings(arguments: argparse.Namespace) -> str:
    """The DQN's settings in words, for the --out file's peer name."""
    changes = [f"Adam at {arguments.adam:g}"] if arguments.adam is not None else []
    changes += [f"{arguments.n_steps}-step targets"] if arguments.n_steps > 1 else []
    return "the MinAtar paper's DQN" + (f" with {', '.join(changes)}" if changes else "")


def parse_arguments() -> argparse.Namespace:
    """The command line, refusing DQN-only settings for the actor-critics, which would ignore them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout",
                        help="Asterix, Breakout, Freeway, Seaquest or SpaceInvaders")
    parser.add_argument("--algo", choices=["a2c", "ppo", "dqn"], default="a2c")
    parser.add_argument("--frames", type=int, default=2_000_000)
    parser.add_argument("--seeds", default="1-3")
    parser.add_argument("--entropy-cost", type=float, default=0.01,
                        help="ent_coef (both actor-critics' default)")
    parser.add_argument("--version", choices=["v0", "v1"], default="v1",
                        help="v0: all 6 actions (the paper's)")
    parser.add_argument("--adam", type=float, metavar="LR", help="DQN: Adam (its defaults) at this step size")
    parser.add_argument("--n-steps", type=int,
                        help="DQN: steps of reward summed into each target (default 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the result file (default: results/peer-sb3-ALGO-GAME-...json)")
    results_format.add_note_argument(parser)
    arguments = parser.parse_args()
    if arguments.algo != "dqn" and (arguments.adam is not None or arguments.n_steps is not None):
        parser.error(f"--adam and --n-steps are DQN settings; --algo {arguments.algo} would ignore them")
    if arguments.n_steps is None:
        arguments.n_steps = 1
    if arguments.n_steps < 1:
        parser.error(f"--n-steps must be 1 or more, not {arguments.n_steps}")
    return arguments


def main() -> None:
    arguments = parse_arguments()
    import stable_baselines3

    game_id = f"MinAtar/{arguments.game}-{arguments.version}"
    settings = dqn_settings(arguments) if arguments.algo == "dqn" else f"ent_coef {arguments.entropy_cost:g}"
    peer = f"stable-baselines3 {stable_baselines3.__version__} {arguments.algo.upper()} {settings}"
    out = arguments.out or results_format.default_out(f"peer-sb3-{arguments.algo}-{arguments.game.lower()}",
                                                      changed_settings(arguments))
    seeds = parse_seeds(arguments.seeds)
    run_section = results_format.run_section("bench/peers/sb3_minatar.py", ["python", *sys.argv], None, [])
    runs: dict[int, dict] = {}
    for seed in seeds:

        def progress(run: dict, seed: int = seed) -> None:
            runs[seed] = run
            results_format.write(out, results_format.measured(
                f"{peer} on {game_id}, {arguments.frames:,} frames", None, peer, run_section, seeds,
                result_tables(arguments.game, game_id, runs, arguments.frames), note=arguments.note))

        run = train(arguments, game_id, seed, progress)
        print(f"{arguments.algo} {arguments.game} seed {seed}: {len(run['episodes'])} episodes, "
              f"{run['wall_s']:.0f} s", flush=True)
    print(f"result: {out}")


if __name__ == "__main__":
    main()
