"""A fused game written in PyTorch, as a user's plugin would be: Catch, a ball falling onto a paddle, batched on a device.

Installed in tests with an entry point `Catch-v0 = fused_catch:make_catch` in the group rlsup.fused_games. A ball
starts in a random column of the top row and falls a row a step; the paddle on the bottom row moves left, stays or
moves right. When the ball reaches the bottom the game pays +1 if the paddle is under it, else -1, and ends. The
observation is the board, flattened: 1 where the ball or the paddle is. FAULT (an environment variable) makes the
game misbehave in the way it names, for the tests of what rlsup does with a faulty plugin.
"""
from __future__ import annotations

import os

import torch

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.fused import FusedStep

ROWS, COLUMNS = 8, 5


class Catch:
    truncates = False  # episodes end by the game alone: rlsup need not bootstrap from a last state

    def __init__(self, num_envs: int, seed: int, device: torch.device):
        self.num_envs, self.device = num_envs, torch.device(device)
        self.observation_shape = (ROWS * COLUMNS,)
        self.observation_dtype = torch.float32
        self.actions = ActionSpace(3)
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)
        self.fault = os.environ.get("FAULT", "")
        self.ball_row = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.ball_column = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.paddle = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def reset(self) -> torch.Tensor:
        self._start(torch.ones(self.num_envs, dtype=torch.bool, device=self.device))
        return self._observations()

    def step(self, actions: torch.Tensor) -> FusedStep:
        self.paddle = torch.clamp(self.paddle + actions - 1, 0, COLUMNS - 1)
        self.ball_row = self.ball_row + 1
        terminations = self.ball_row == ROWS - 1
        caught = self.paddle == self.ball_column
        rewards = torch.where(terminations, torch.where(caught, 1.0, -1.0), 0.0).to(torch.float32)
        if self.fault == "nan-reward":
            rewards = rewards + float("nan")
        final_observations = self._observations()
        self._start(terminations)
        observations = self._observations()
        if self.fault == "wrong-shape":
            observations = observations[:, :-1]
        return FusedStep(observations, rewards, terminations, torch.zeros_like(terminations), final_observations)

    def _start(self, games: torch.Tensor) -> None:
        """New episodes in the games marked: the ball in a random column of the top row, the paddle in the middle."""
        columns = torch.randint(0, COLUMNS, (self.num_envs,), generator=self.generator, device=self.device)
        self.ball_column = torch.where(games, columns, self.ball_column)
        self.ball_row = torch.where(games, 0, self.ball_row)
        self.paddle = torch.where(games, COLUMNS // 2, self.paddle)

    def _observations(self) -> torch.Tensor:
        board = torch.zeros(self.num_envs, ROWS, COLUMNS, device=self.device)
        games = torch.arange(self.num_envs, device=self.device)
        board[games, self.ball_row, self.ball_column] = 1.0
        board[games, ROWS - 1, self.paddle] = 1.0
        return board.flatten(1)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "ball_row": self.ball_row.cpu(),
                "ball_column": self.ball_column.cpu(), "paddle": self.paddle.cpu()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(torch.as_tensor(state["generator"], dtype=torch.uint8))
        for name in ("ball_row", "ball_column", "paddle"):
            setattr(self, name, torch.as_tensor(state[name], dtype=torch.int64).to(self.device))

    def close(self) -> None:
        pass


def make_catch(num_envs: int, seed: int, device: torch.device) -> Catch:
    return Catch(num_envs, seed, device)
