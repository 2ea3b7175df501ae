"""The MinAtar paper's learning curves at 0.5M, 1M, 2M and 5M frames, for every game: what the benches compare with.

Young & Tian 2019, "MinAtar: An Atari-inspired testbed for thorough and reproducible reinforcement learning
experiments" (arXiv:1903.03176), the figure img/learning_curves.gif of github.com/kenjyoung/MinAtar: the mean
over 30 seeds of the average return of the last 100 training episodes, read off the figure (about +-2% of
each axis). DQN is the paper's DQN; AC is its online actor-critic with eligibility traces, AC(0.8). None:
the curve is still at its start there. The paper used all 6 actions (the -v0 ids); rlsup's jobs use the -v1
ids, each game's minimal action set, except jobs/minatar-dqn.toml's Breakout (-v0, worth about 1.6 at 1M
there: 8.31 against 6.72 over seeds 1-3 at its earlier settings, in `git show 54f84b3:docs/results/minatar-dqn.md`).
The Breakout values below 500k frames come from the same figure. moving_average_at is the paper's measure
of a run's episodes, and marks_for the frames a bench reads it at.
"""
from __future__ import annotations

import statistics

WINDOW = 100  # episodes in the paper's moving average
GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
MARKS = (500_000, 1_000_000, 2_000_000, 5_000_000)

# game -> agent -> frames -> the paper's measure.
PAPER = {
    "Breakout": {"DQN": {500_000: 8.3, 1_000_000: 9.2, 2_000_000: 9.6, 5_000_000: 10.0},
                 "AC": {500_000: 7.0, 1_000_000: 9.9, 2_000_000: 14.2, 5_000_000: 17.6}},
    "Asterix": {"DQN": {500_000: 1.0, 1_000_000: 7.3, 2_000_000: 14.3, 5_000_000: 17.2},
                "AC": {500_000: None, 1_000_000: 0.8, 2_000_000: 6.4, 5_000_000: 19.2}},
    "Freeway": {"DQN": {500_000: 34.5, 1_000_000: 47.8, 2_000_000: 50.7, 5_000_000: 50.2},
                "AC": {500_000: None, 1_000_000: None, 2_000_000: 14.5, 5_000_000: 47.5}},
    "Seaquest": {"DQN": {500_000: 0.9, 1_000_000: 1.0, 2_000_000: 4.9, 5_000_000: 20.3},
                 "AC": {500_000: None, 1_000_000: 0.6, 2_000_000: 2.1, 5_000_000: 15.7}},
    "SpaceInvaders": {"DQN": {500_000: 28.0, 1_000_000: 32.5, 2_000_000: 41.5, 5_000_000: 43.1},
                      "AC": {500_000: 26.9, 1_000_000: 52.1, 2_000_000: 106.1, 5_000_000: 185.6}},
}
# Breakout before 500k, read off the same figure (to about +-0.3): for short budgets.
BREAKOUT_EARLY = {"DQN": {50_000: 1.3, 100_000: 4.4, 150_000: 5.3, 200_000: 6.1, 250_000: 6.7, 300_000: 7.3,
                          400_000: 8.2},
                  "AC": {50_000: 3.2, 100_000: 3.8, 150_000: 4.5, 200_000: 5.1, 250_000: 5.6, 300_000: 6.0,
                         400_000: 6.5}}


def game_of(env_id: str) -> str:
    """'MinAtar/Breakout-v1' -> 'Breakout'."""
    return env_id.split("/")[-1].split("-")[0]


def version_of(env_id: str) -> str:
    """'MinAtar/Breakout-v1' -> 'v1' (each game's minimal action set); 'v0' has all 6 actions, as the paper."""
    return env_id.rpartition("-")[2]


def paper_value(game: str, agent: str, frames: int) -> float | None:
    """The paper's measure for a game and agent at frames, where the figure gives one."""
    curve = {**(BREAKOUT_EARLY.get(agent, {}) if game == "Breakout" else {}), **PAPER.get(game, {}).get(agent, {})}
    return curve.get(frames)


def moving_average_at(episodes: list[tuple[int, float]], frames: int) -> float | None:
    """The paper's measure: the mean return of the last WINDOW episodes (frames, return) that ended by frames."""
    ended = [episode_return for step, episode_return in episodes if step <= frames][-WINDOW:]
    return statistics.fmean(ended) if ended else None


def marks_for(game: str, steps: int) -> list[int]:
    """The frames the paper's figure gives values at, within the budget, and the budget itself."""
    early = sorted(BREAKOUT_EARLY["DQN"]) if game == "Breakout" else []
    marks = [mark for mark in (*early, *MARKS) if mark <= steps]
    return marks + ([steps] if steps not in marks else [])
