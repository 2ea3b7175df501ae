"""Rewards divided by the running standard deviation of each env's discounted return, as stable-baselines3's VecNormalize."""
from __future__ import annotations

import numpy as np

# The statistics start as one pseudo-observation of variance 1 (VecNormalize's RunningMeanStd), so that the first
# steps are not divided by the spread of a handful of returns.
PRIOR_COUNT = 1e-4
EPSILON = 1e-8


class RewardScale:
    """Learning rewards of a vector of envs, scaled so that the discounted return has unit variance.

    The variance is of the discounted return so far, γ G + r, over every env and step (not the rewards'): what the
    value function must fit. Statistics in float64, updated in step order: the same steps give the same scale."""

    def __init__(self, envs: int, gamma: float):
        self.gamma = gamma
        self.returns = np.zeros(envs, np.float64)
        self.count, self.mean, self.variance = PRIOR_COUNT, 0.0, 1.0

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """The step's rewards [N] scaled; dones [N] end each env's return after this step."""
        self.returns = self.returns * self.gamma + rewards
        self._update(self.returns)
        self.returns[np.asarray(dones, bool)] = 0.0
        return rewards / np.sqrt(self.variance + EPSILON)

    def _update(self, values: np.ndarray) -> None:
        """Chan et al.'s parallel update of the mean and variance with a batch."""
        count = len(values)
        delta = float(values.mean()) - self.mean
        total = self.count + count
        self.mean += delta * count / total
        moments = self.variance * self.count + float(values.var()) * count + delta ** 2 * self.count * count / total
        self.count, self.variance = total, moments / total

    def state_dict(self) -> dict:
        return {"returns": self.returns.copy(), "count": self.count, "mean": self.mean, "variance": self.variance}

    def load_state_dict(self, state: dict) -> None:
        returns = np.asarray(state["returns"], np.float64)
        if returns.shape != self.returns.shape:
            raise ValueError(f"the saved reward scale follows {len(returns)} envs, this actor steps {len(self.returns)}")
        self.returns = returns.copy()
        self.count, self.mean, self.variance = float(state["count"]), float(state["mean"]), float(state["variance"])
