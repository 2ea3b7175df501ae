"""Running means and variances for V-trace's normalisation of rewards (by the return's spread) and of observations."""
from __future__ import annotations

import numpy as np

# The statistics start as one pseudo-observation of mean 0 and variance 1 (stable-baselines3's RunningMeanStd), so
# that the first steps are not divided by the spread of a handful of values.
PRIOR_COUNT = 1e-4
EPSILON = 1e-8


class RunningMoments:
    """The mean and variance of every value seen so far, per entry of a shape, in float64 (Chan et al.'s merge of
    batches): the same values in the same order give the same bits."""

    def __init__(self, shape: tuple = ()):
        self.count = PRIOR_COUNT
        self.mean = np.zeros(shape, np.float64)
        self.variance = np.ones(shape, np.float64)

    def update(self, values: np.ndarray) -> None:
        """Merge a batch of values [N, *shape]."""
        values = np.asarray(values, np.float64)
        count = len(values)
        delta = values.mean(axis=0) - self.mean
        total = self.count + count
        moments = self.variance * self.count + values.var(axis=0) * count + delta ** 2 * self.count * count / total
        self.mean = self.mean + delta * count / total
        self.count, self.variance = total, moments / total

    def std(self) -> np.ndarray:
        return np.sqrt(self.variance + EPSILON)

    def state_dict(self) -> dict:
        # Arrays even of shape (): a checkpoint stores no numpy scalars.
        return {"count": float(self.count), "mean": np.array(self.mean, np.float64),
                "variance": np.array(self.variance, np.float64)}

    def load_state_dict(self, state: dict) -> None:
        mean, variance = (np.asarray(state[key], np.float64) for key in ("mean", "variance"))
        if mean.shape != self.mean.shape or variance.shape != self.variance.shape:
            raise ValueError(f"the saved running statistics have shape {mean.shape}, these have {self.mean.shape}")
        self.count, self.mean, self.variance = float(state["count"]), mean.copy(), variance.copy()


class RewardScale:
    """Learning rewards of a vector of envs, scaled so that the discounted return has unit variance.

    The variance is of the discounted return so far, γ G + r, over every env and step (not the rewards'): what the
    value function must fit, as stable-baselines3's VecNormalize scales it."""

    def __init__(self, envs: int, gamma: float):
        self.gamma = gamma
        self.returns = np.zeros(envs, np.float64)
        self.moments = RunningMoments()

    def __call__(self, rewards: np.ndarray, dones: np.ndarray) -> np.ndarray:
        """The step's rewards [N] scaled; dones [N] end each env's return after this step."""
        self.returns = self.returns * self.gamma + rewards
        self.moments.update(self.returns)
        self.returns[np.asarray(dones, bool)] = 0.0
        return rewards / self.moments.std()

    def state_dict(self) -> dict:
        return {"returns": self.returns.copy(), **self.moments.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        returns = np.asarray(state["returns"], np.float64)
        if returns.shape != self.returns.shape:
            raise ValueError(f"the saved reward scale follows {len(returns)} envs, this actor steps "
                             f"{len(self.returns)}")
        self.moments.load_state_dict(state)
        self.returns = returns.copy()
