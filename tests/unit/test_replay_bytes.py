"""The replays' size estimate that refuses a job before it allocates: a continuous action's row holds a float per
entry, so a MuJoCo job's estimate grows with its action vector."""
from __future__ import annotations

from rlsup import spec as specs
from rlsup.algos.memory import replay_bytes


def job(env_id: str, algo: str, capacity: int = 1_000) -> specs.JobSpec:
    spec = specs.JobSpec().replace("job", algo=algo).replace("env", id=env_id)
    return specs.JobSpec(job=spec.job, env=spec.env, replay=(specs.ReplaySection(capacity=capacity),))


def test_a_continuous_row_counts_a_float_per_action_entry():
    # Pendulum: 3 float32 observations (12 bytes), one action entry, a reward and three flags.
    assert replay_bytes(job("Pendulum-v1", "sac")) == 1_000 * (12 + 4 + 4 + 3)
    # CartPole: 4 float32 observations and one int32 action, as before.
    assert replay_bytes(job("CartPole-v1", "dqn")) == 1_000 * (16 + 4 + 4 + 3)


def test_the_estimate_grows_with_the_action_vector():
    # BipedalWalker-v3: 24 observations, 4 action entries.
    assert replay_bytes(job("BipedalWalker-v3", "sac")) == 1_000 * (96 + 16 + 4 + 3)
