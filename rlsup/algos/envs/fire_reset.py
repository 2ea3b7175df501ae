"""Press FIRE to start play after a reset and after a lost life, in Atari games that wait for it."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

FIRE = "FIRE"


def needs_fire(game: gym.Env) -> bool:
    """Whether a game's actions include FIRE: the rule of CleanRL and stable-baselines3."""
    meanings = game.unwrapped.get_action_meanings()
    return FIRE in meanings and len(meanings) >= 3


class FireReset(gym.Wrapper):
    """FIRE (then the game's third action, UP in most) after each reset, as stable-baselines3's
    FireResetEnv does, and FIRE after each lost life, which its EpisodicLifeEnv reset brings about.

    Without it a greedy Breakout policy that never chooses FIRE stalls until the episode's frame
    limit, and scores are not comparable with those projects'. It holds no state of its own between
    steps: capturing the layers below it captures everything.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.fire_action = env.unwrapped.get_action_meanings().index(FIRE)

    def reset(self, **kwargs: Any):
        self.env.reset(**kwargs)
        for action in (self.fire_action, 2):
            observation, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:  # a game that ends at once: start it again, as FireResetEnv does
                observation, info = self.env.reset()
        return observation, info

    def step(self, action: int):
        lives = self.env.unwrapped.ale.lives()
        observation, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) and self.env.unwrapped.ale.lives() < lives:
            observation, fire_reward, terminated, truncated, info = self.env.step(self.fire_action)
            reward += fire_reward
        return observation, reward, terminated, truncated, info
