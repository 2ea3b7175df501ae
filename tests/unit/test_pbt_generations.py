"""PBT's daemon side without a daemon: a fork's values judged by the job loader itself before anyone is replaced
(issue 49 item 7), and where a member that came late holds next (item 5)."""
from __future__ import annotations

import math

import pytest

from rlsup import spec as specs
from rlsup.daemon.pbt_generations import fork_refusal, fork_spec, generation_hold
from rlsup.decisions.pbt import PbtSettings
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


def test_a_late_member_holds_next_at_the_first_generation_not_yet_taken() -> None:
    """A seed that joined after generations 1-3 were taken goes on from generation 1 straight to generation 4,
    rather than pausing with a checkpoint and restarting at 2 and 3 only to be told to go on."""
    settings = PbtSettings(interval=300, quantile=0.25, perturb={"dqn.lr": (0.8, 1.25)})
    assert generation_hold(settings, 300, 3_000, taken={300, 600, 900}).step == 1_200
    assert generation_hold(settings, 300, 3_000).step == 600
    assert generation_hold(settings, 300, 1_200, taken={300, 600, 900}) is None  # its budget ends first
