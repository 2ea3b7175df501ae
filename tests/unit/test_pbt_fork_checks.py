"""A PBT fork's values are judged by the job loader itself before anyone is replaced (issue 49 item 7)."""
from __future__ import annotations

import math

import pytest

from rlsup import spec as specs
from rlsup.daemon.pbt_generations import fork_refusal, fork_spec
from rlsup_testing import cartpole_text

PARENT = specs.loads(cartpole_text(total_steps=600).replace("[dqn]\n", "[dqn]\nepsilon_start = 0.5\n"))


@pytest.mark.parametrize("values, refusal", [
    # Inside epsilon_end's range once clamped to its maximum (1), but above epsilon_start: the attack's 1e6.
    ({"dqn.epsilon_end": 0.01 * 1e6}, "dqn.epsilon_end: must not exceed epsilon_start"),
    # An lr multiplied down until it underflowed: 0 is lr's minimum, which it must be above.
    ({"dqn.lr": 5e-324 * 0.25}, "dqn.lr: must be greater than 0.0, not 0.0"),
    ({"dqn.lr": math.inf}, "dqn.lr: must be finite"),
])
def test_a_fork_the_loader_would_refuse_is_refused_with_the_loaders_words(values: dict, refusal: str) -> None:
    """issue 49 item 7: these forks were written, and their workers ended with exit 2 on their job.toml."""
    why = fork_refusal(PARENT, values)
    assert why is not None and refusal in why, why
    with pytest.raises(specs.SpecError):  # what the fork's worker would have met
        specs.loads(fork_spec(PARENT, "fork", values).to_toml())


def test_a_fork_within_every_rule_is_made_as_perturbed() -> None:
    values = {"dqn.epsilon_end": 0.01 * 1.25, "dqn.lr": 1e-3 * 0.8}
    assert fork_refusal(PARENT, values) is None
    made = fork_spec(PARENT, "cartpole-g1-m2", values)
    assert (made.job.name, made.dqn.epsilon_end, made.dqn.lr) == ("cartpole-g1-m2", 0.01 * 1.25, 1e-3 * 0.8)
