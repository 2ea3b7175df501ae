"""Restore time of an env state on its longest episode: action replay against the dedicated capturers.

    python bench/env_restore.py [--repeats 5] [--episodes 10]

The result (bench/results_format.py) goes to --out, by default results/env-restore.json.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from typing import Callable

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import TransformReward

import results_format  # bench/ beside this script
from rlsup.algos.envs.training import TrainingEnv, make_env
from rlsup.spec import EnvSection

Policy = Callable[[np.ndarray], int]


def balance(observation: np.ndarray) -> int:
    """CartPole: push toward the pole's fall; it keeps the pole up for the whole 500-step limit."""
    return int(observation[2] + 0.5 * observation[3] > 0)


def hover(observation: np.ndarray) -> int:
    """LunarLander: Gymnasium's heuristic lander, aiming at a height it never lands from, so the episode
    runs to its 1000-step limit."""
    x, y, vx, vy, angle, spin = (float(value) for value in observation[:6])
    angle_todo = (np.clip(0.5 * x + vx, -0.4, 0.4) - angle) * 0.5 - spin
    hover_todo = (0.8 - y) * 0.5 - vy * 0.5
    if hover_todo > abs(angle_todo) and hover_todo > 0.05:
        return 2
    if abs(angle_todo) > 0.05:
        return 3 if angle_todo < 0 else 1
    return 0


def follow_ball(observation: np.ndarray) -> int:
    """MinAtar Breakout (actions: no-op, left, right; channels first: paddle, ball, trail): keep the paddle
    under the ball's next column; it clears wall after wall, so episodes run long (until a sticky action
    makes it miss)."""
    paddle = np.argwhere(observation[0])[0][1]
    ball, trail = np.argwhere(observation[1]), np.argwhere(observation[2])
    if len(ball) == 0:
        return 0
    column = ball[0][1]
    target = int(np.clip(column + (column - trail[0][1] if len(trail) else 0), 0, 9))
    if target == paddle:
        return 0
    return 1 if target < paddle else 2


def longest_episode_state(env: TrainingEnv, policy: Policy, limit: int) -> tuple[dict, int]:
    """The env's state one step before its episode under policy ends (or at limit steps): the most to replay."""
    observation, states = env.reset(), []
    for _ in range(limit):
        states.append(env.state_dict())
        result = env.step(policy(observation))
        if result.done:
            break
        observation = result.observation
    return states[-1], len(states) - 1


def restore_seconds(make: Callable[[int], TrainingEnv], state: dict, repeats: int) -> float:
    """Median wall time of load_state_dict into a freshly made env (made outside the timing)."""
    times = []
    for seed in range(repeats):
        env = make(seed)
        env.reset()
        start = time.perf_counter()
        mismatch = env.load_state_dict(state)
        times.append(time.perf_counter() - start)
        assert mismatch is None, mismatch
        env.close()
    return statistics.median(times)


def replayed(env_id: str, wrap: bool = False) -> Callable[[int], TrainingEnv]:
    """An env on the action-replay path: as made, or (for envs with a capturer) under an uncaptured wrapper."""
    settings = EnvSection(id=env_id)

    def make(seed: int) -> TrainingEnv:
        if not wrap:
            return make_env(settings, seed=seed)
        stack = TransformReward(gym.make(env_id, disable_env_checker=True), lambda reward: reward)
        return TrainingEnv(stack, settings, seed, None)
    return make


def cases() -> list[tuple[str, Callable[[int], TrainingEnv], Policy, int]]:
    found = [("CartPole-v1, dedicated capturer", lambda seed: make_env(EnvSection(id="CartPole-v1"), seed=seed),
              balance, 500),
             ("CartPole-v1, action replay", replayed("CartPole-v1", wrap=True), balance, 500)]
    if importlib.util.find_spec("Box2D"):
        found.append(("LunarLander-v3, action replay", replayed("LunarLander-v3"), hover, 1000))
    else:
        print("LunarLander-v3: Box2D is not installed, skipped")
    if importlib.util.find_spec("minatar"):
        found.append(("MinAtar/Breakout-v1, action replay", replayed("MinAtar/Breakout-v1"), follow_ball, 10_000))
    else:
        print("MinAtar/Breakout-v1: minatar is not installed, skipped")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="restores timed per env (the median is shown)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes played per env to find the longest")
    results_format.add_out_argument(parser, "results/env-restore.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/env_restore.py")
    print(f"{'env, capture':38}  {'episode steps':>15}  {'restore ms':>10}  {'us per step':>11}")
    rows = {}
    for name, make, policy, limit in cases():
        # The longest of a few episodes: the restore a resume pays at worst.
        state, steps = max((longest_episode_state(make(seed), policy, limit) for seed in range(arguments.episodes)),
                           key=lambda found: found[1])
        seconds = restore_seconds(make, state, arguments.repeats)
        print(f"{name:38}  {steps:>15,}  {seconds * 1e3:>10.2f}  {seconds * 1e6 / max(steps, 1):>11.1f}")
        rows[name] = [steps, seconds * 1e3, seconds * 1e6 / max(steps, 1)]
    column = results_format.column
    table = results_format.measurement(
        "Restore of the longest episode's state", "env, capture", [column("episode steps", "steps"),
                                                                   column("restore", "ms", 2),
                                                                   column("per episode step", "µs", 1)], rows,
        f"The longest of {arguments.episodes} episodes per env (the restore a resume pays at worst); the median of "
        f"{arguments.repeats} restores.")
    slowest = max(rows.items(), key=lambda item: item[1][1])
    results_format.write_figures(arguments, run, "env-restore", "Restore time of an env state on its longest episode",
                                 [table], f"The slowest restore was {slowest[0]}'s: {slowest[1][1]:,.1f} ms.")


if __name__ == "__main__":
    main()
