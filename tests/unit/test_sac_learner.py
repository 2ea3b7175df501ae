"""SAC's networks and gradient step: the squashed Gaussian's log-probabilities, the batched twin critics, the
temperature's tuning, and a checkpoint that continues bit for bit."""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from torch import distributions, nn

from rlsup.algos.nets import MlpTorso
from rlsup.algos.sac_learner import SacLearner, SacParameters
from rlsup.algos.sac_networks import SquashedGaussianPolicy, Temperature, TwinQ
from rlsup.replay.storage import TransitionBatch
from rlsup.spec import SacSection

LOW, HIGH = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)


def policy() -> SquashedGaussianPolicy:
    torch.manual_seed(0)
    return SquashedGaussianPolicy(MlpTorso(3, [16]), LOW, HIGH)


def test_log_probabilities_are_those_of_the_squashed_scaled_gaussian():
    """The change of variables through tanh and the affine scale, against torch.distributions' own."""
    network = policy()
    observations = torch.randn(64, 3)
    noise = torch.randn(64, 2)
    actions, log_probabilities = network.sample(observations, noise)
    mean, log_std = network.mean_and_log_std(network.features(observations))
    reference = distributions.TransformedDistribution(
        distributions.Normal(mean, log_std.exp()),
        [distributions.TanhTransform(), distributions.AffineTransform(network.action_bias, network.action_scale)])
    expected = reference.log_prob(actions).sum(-1)
    # The 1e-6 that keeps the Jacobian's log finite at the bounds is the only difference.
    torch.testing.assert_close(log_probabilities, expected, atol=2e-3, rtol=1e-4)
    assert ((actions >= torch.as_tensor(LOW)) & (actions <= torch.as_tensor(HIGH))).all()


def test_the_deterministic_policy_is_the_squashed_mean_inside_the_bounds():
    network = policy()
    observations = torch.randn(8, 3)
    actions, _ = network.sample(observations, torch.zeros(8, 2))
    torch.testing.assert_close(network(observations), actions)


def test_twin_critics_are_two_independent_mlps():
    """The batched layers compute what two nn.Linear stacks with the same weights compute."""
    torch.manual_seed(1)
    critic = TwinQ(3, 2, [8, 8])
    observations, actions = torch.randn(5, 3), torch.randn(5, 2)
    values = critic(observations, actions)
    assert values.shape == (2, 5)
    for index in range(2):
        layers = []
        for number, (weight, bias) in enumerate(zip(critic.weights, critic.biases)):
            linear = nn.Linear(*weight.shape[1:])
            linear.weight.data, linear.bias.data = weight[index].T.clone(), bias[index, 0].clone()
            layers += [linear] + ([nn.ReLU()] if number < len(critic.weights) - 1 else [])
        torch.testing.assert_close(values[index], nn.Sequential(*layers)(torch.cat([observations, actions], 1))[:, 0])
    assert not torch.equal(critic.weights[0][0], critic.weights[0][1])  # each critic starts on its own draw


def learner(seed: int = 0, **settings) -> SacLearner:
    torch.manual_seed(seed)
    section = SacSection(**settings)
    parameters = SacParameters(SquashedGaussianPolicy(MlpTorso(3, [16]), LOW, HIGH), TwinQ(3, 2, [16]),
                               Temperature(section.temperature))
    return SacLearner(section, parameters, 2, torch.device("cpu"), seed=seed)


def batch(generator: np.random.Generator, size: int = 32) -> TransitionBatch:
    return TransitionBatch(observations=generator.standard_normal((size, 3), dtype=np.float32),
                           actions=generator.uniform(LOW, HIGH, (size, 2)).astype(np.float32),
                           returns=generator.standard_normal(size, dtype=np.float32),
                           next_observations=generator.standard_normal((size, 3), dtype=np.float32),
                           discounts=np.full(size, 0.99, np.float32), indices=np.arange(size))


def test_the_policy_and_temperature_move_on_their_schedule():
    """policy_every = 2: steps 0, 2, 4 take two policy steps each; the targets move every step."""
    sac = learner(policy_every=2)
    generator = np.random.default_rng(0)
    policy_before = [parameter.clone() for parameter in sac.policy.parameters()]
    sac.update(batch(generator))
    assert sac.policy_optimizer.state[next(sac.policy.parameters())]["step"].item() == 2
    sac.update(batch(generator))
    assert sac.policy_optimizer.state[next(sac.policy.parameters())]["step"].item() == 2
    assert sac.critic_optimizer.state[next(sac.critic.parameters())]["step"].item() == 2
    assert not all(torch.equal(before, now) for before, now in zip(policy_before, sac.policy.parameters()))
    assert not torch.equal(sac.target.weights[0], sac.critic.weights[0])  # Polyak: close, never equal
    torch.testing.assert_close(sac.target.weights[0], sac.critic.weights[0], atol=0.05, rtol=0)


def test_the_temperature_falls_while_the_entropy_is_above_its_target():
    """A wide policy's entropy is far above -|A|: the temperature's loss lowers alpha, step after step."""
    sac = learner(lr_temperature=0.05)
    generator = np.random.default_rng(0)
    temperatures = []
    for _ in range(10):
        temperatures.append(float(sac.update(batch(generator))["temperature"]))
    assert temperatures == sorted(temperatures, reverse=True) and temperatures[-1] < 0.2


def test_a_loaded_learner_continues_bit_for_bit():
    straight, resumed = learner(), learner(seed=7)
    batches = [batch(np.random.default_rng(index)) for index in range(6)]
    for item in batches[:3]:
        straight.update(item)
    saved = io.BytesIO()
    torch.save(straight.state_dict(), saved)  # as a checkpoint holds it: no tensor shared with the straight run
    saved.seek(0)
    resumed.load_state_dict(torch.load(saved, weights_only=True))
    assert resumed.fingerprint() == straight.fingerprint()
    for item in batches[3:]:
        straight_losses, resumed_losses = straight.update(item), resumed.update(item)
        assert {name: float(value) for name, value in straight_losses.items()} == \
               {name: float(value) for name, value in resumed_losses.items()}
    assert resumed.fingerprint() == straight.fingerprint()


def test_without_autotune_the_temperature_stays():
    sac = learner(autotune=False, temperature=0.3)
    generator = np.random.default_rng(0)
    for _ in range(3):
        losses = sac.update(batch(generator))
    assert float(losses["temperature"]) == pytest.approx(0.3)
