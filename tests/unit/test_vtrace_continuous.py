"""V-trace with Box actions: the Gaussian's densities and entropy, the squash's Jacobian, the ratio, and unrolls."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import distributions

from rlsup.algos.actors import Actor
from rlsup.algos.device import UsageError
from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.gaussian import ActionMap, MeanActions, gaussian_entropies, gaussian_log_probabilities
from rlsup.algos.impala import VtraceLearner, observation_moments, refuse_logits_distance
from rlsup.algos.nets import GaussianPolicyValueNetwork, NormalisedTorso, fingerprint, policy_value_network_of
from rlsup.algos.shared_memory import WeightsBuffer
from rlsup.replay.mixer import ReplayMixer, make_replay
from rlsup.replay.unrolls import UnrollBatch, UnrollStorage
from rlsup.spec import JobSpec, ReplaySection, VtraceSection

T, SIZE, OBSERVATION, FEATURES = 5, 6, (3,), 4
ACTIONS = ActionSpace(2, (-2.0, 0.0), (2.0, 0.5))  # unequal bounds, so that the scale's Jacobian shows
SETTINGS = VtraceSection(hidden_sizes=[16], feature_size=FEATURES, max_grad_norm=0.0)


def random_gaussian(seed: int, shape=(7, 3)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    means = torch.randn(shape, generator=generator, dtype=torch.float64)
    log_stds = torch.randn(shape, generator=generator, dtype=torch.float64) * 0.5
    samples = means + log_stds.exp() * torch.randn(shape, generator=generator, dtype=torch.float64)
    return means, log_stds, samples


# -- the Gaussian and the squash ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_log_probabilities_and_entropy_are_torch_distributions_diagonal_normal(seed: int) -> None:
    means, log_stds, samples = random_gaussian(seed)
    normal = distributions.Independent(distributions.Normal(means, log_stds.exp()), 1)
    torch.testing.assert_close(gaussian_log_probabilities(means, log_stds, samples), normal.log_prob(samples))
    torch.testing.assert_close(gaussian_entropies(log_stds), normal.entropy())


@pytest.mark.parametrize("seed", range(3))
def test_tanh_log_probabilities_are_the_density_of_the_env_action(seed: int) -> None:
    # The action the env receives is low + (tanh(u) + 1) (high − low) / 2: torch's transformed distribution is
    # the reference for the change of variables, its Jacobian included.
    action_map = ActionMap(ACTIONS, "tanh")
    means, log_stds, samples = random_gaussian(seed, (7, 2))
    low, half_range = (torch.as_tensor(bound, dtype=torch.float64) for bound in (action_map.low, action_map.half_range))
    squashed = distributions.TransformedDistribution(
        distributions.Independent(distributions.Normal(means, log_stds.exp()), 1),
        [distributions.TanhTransform(), distributions.AffineTransform(low + half_range, half_range, event_dim=1)])
    env_actions = action_map.env_actions_tensor(samples)
    torch.testing.assert_close(action_map.log_probabilities(means, log_stds, samples), squashed.log_prob(env_actions))
    np.testing.assert_allclose(action_map.env_actions(samples.numpy()), env_actions.numpy(), rtol=1e-6, atol=1e-6)


def test_the_tanh_jacobian_stays_finite_where_tanh_rounds_to_its_bound() -> None:
    samples = torch.tensor([[30.0, -30.0]], dtype=torch.float32)
    jacobian = ActionMap(ACTIONS, "tanh").log_jacobian(samples)
    assert torch.isfinite(jacobian).all()
    expected = 2 * 2 * (math.log(2.0) - 30.0) + ActionMap(ACTIONS, "tanh").log_scale  # log(4 e^-60) per entry
    assert jacobian.item() == pytest.approx(expected, rel=1e-5)


def test_clip_keeps_the_unclipped_samples_density_and_clips_only_the_env_action() -> None:
    action_map = ActionMap(ACTIONS, "clip")
    means, log_stds, samples = random_gaussian(0, (7, 2))
    samples[0] = torch.tensor([5.0, -5.0])  # far outside the bounds
    expected = gaussian_log_probabilities(means, log_stds, samples) - math.log(2.0 * 0.25)
    torch.testing.assert_close(action_map.log_probabilities(means, log_stds, samples), expected)
    env_actions = action_map.env_actions(samples.numpy())
    assert env_actions.dtype == np.float32
    np.testing.assert_array_equal(env_actions[0], [2.0, 0.0])
    assert (env_actions >= action_map.low).all() and (env_actions <= action_map.high).all()


def test_an_action_map_refuses_discrete_actions_and_unknown_squashes() -> None:
    with pytest.raises(ValueError, match="continuous actions"):
        ActionMap(ActionSpace(4), "clip")
    with pytest.raises(ValueError, match="squash must be one of clip, tanh"):
        ActionMap(ACTIONS, "sigmoid")


# -- the learner --------------------------------------------------------------------------------------


def continuous_learner(squash: str = "clip", **fields) -> VtraceLearner:
    settings = replace(SETTINGS, squash=squash, **fields)
    torch.manual_seed(0)
    network = policy_value_network_of(settings, OBSERVATION, ACTIONS.count, continuous=True)
    return VtraceLearner(settings, network, torch.device("cpu"), ACTIONS)


def continuous_batch(learner: VtraceLearner, seed: int, behaviour_shift: np.ndarray | float = 0.0) -> UnrollBatch:
    """Unrolls acted by the learner's own policy; behaviour log-probabilities lowered by behaviour_shift."""
    generator = np.random.default_rng(seed)
    observations = generator.normal(size=(T + 1, SIZE, *OBSERVATION)).astype(np.float32)
    with torch.no_grad():
        output = learner.network(torch.from_numpy(observations[:-1]).flatten(0, 1))
        means, log_stds = (tensor.view(T, SIZE, -1) for tensor in (output.means, output.log_stds))
        samples = (means + log_stds.exp() * torch.randn(means.shape)).float()
        behaviour = learner.action_map.log_probabilities(means, log_stds, samples).numpy() - behaviour_shift
    return UnrollBatch(observations=observations, actions=samples.numpy(),
                       rewards=generator.normal(0, 5, size=(T, SIZE)).astype(np.float32),
                       dones=generator.random((T, SIZE)) < 0.1, behaviour_logits=None,
                       features=np.zeros((T + 1, SIZE, FEATURES), np.float32), indices=np.arange(SIZE),
                       behaviour_log_probs=behaviour.astype(np.float32))


@pytest.mark.parametrize("squash", ["clip", "tanh"])
def test_the_ratio_is_the_exponent_of_target_less_behaviour_log_probabilities(squash: str) -> None:
    learner = continuous_learner(squash)
    shift = np.random.default_rng(3).normal(0, 0.3, size=(T, SIZE)).astype(np.float32)
    statistics = learner.update(continuous_batch(learner, seed=1, behaviour_shift=shift), step=0)
    # The batch's behaviour is the learner's own policy lowered by shift: log ρ = shift, to float32 rounding.
    assert statistics["mean_rho"].item() == pytest.approx(float(np.exp(shift.astype(np.float64)).mean()), rel=1e-4)


def test_an_on_policy_batch_has_ratios_of_one_and_the_gaussians_entropy() -> None:
    learner = continuous_learner(log_std_init=-0.7)
    statistics = learner.update(continuous_batch(learner, seed=2), step=0)
    assert statistics["mean_rho"].item() == pytest.approx(1.0, abs=1e-5)
    scale = math.log(2.0 * 0.25)
    assert statistics["entropy"].item() == pytest.approx(2 * (-0.7 + 0.5 + 0.5 * math.log(2 * math.pi)) + scale,
                                                         rel=1e-5)


def test_an_update_moves_the_means_and_the_learned_log_std() -> None:
    learner = continuous_learner()
    before = learner.network.log_std.detach().clone()
    learner.update(continuous_batch(learner, seed=4), step=0)
    assert learner.network.log_std.grad is not None and not torch.equal(learner.network.log_std.detach(), before)
    state = learner.state_dict()
    restored = continuous_learner()
    restored.load_state_dict(state)
    assert fingerprint(restored.network) == fingerprint(learner.network)


def test_greedy_actions_are_the_mean_in_the_bounds_and_export_plays_the_same() -> None:
    learner = continuous_learner("tanh")
    observations = np.random.default_rng(5).normal(size=(9, *OBSERVATION)).astype(np.float32) * 50
    greedy = learner.greedy_actions(observations)
    assert greedy.shape == (9, 2) and (greedy >= ACTIONS.low).all() and (greedy <= ACTIONS.high).all()
    exported = MeanActions(learner.network, learner.action_map).eval()
    np.testing.assert_array_equal(exported(torch.from_numpy(observations)).detach().numpy(), greedy)


def test_the_gaussian_network_starts_near_the_middle_with_the_configured_log_std() -> None:
    network = policy_value_network_of(replace(SETTINGS, log_std_init=-1.5), OBSERVATION, 3, continuous=True)
    assert isinstance(network, GaussianPolicyValueNetwork)
    output = network(torch.zeros(4, *OBSERVATION))
    assert output.means.shape == output.log_stds.shape == (4, 3)
    assert torch.equal(output.log_stds, torch.full((4, 3), -1.5))
    assert output.means.abs().max() < 0.05


# -- the actor's sampling ------------------------------------------------------------------------------


def test_an_actor_stores_the_unclipped_sample_with_its_log_probability_and_gives_the_env_the_clipped_one() -> None:
    actor = Actor.__new__(Actor)  # the sampling alone: no envs
    actor.action_map = ActionMap(ACTIONS, "clip")
    actor.sampling = np.random.Generator(np.random.PCG64(0))
    means = np.zeros((64, 2), np.float32)
    log_stds = np.full((64, 2), 0.5, np.float32)
    samples, behaviour, env_actions = actor._act((means, log_stds))
    assert samples.dtype == np.float32 and np.abs(samples).max() > 1.0, "some samples must fall outside the bounds"
    np.testing.assert_array_equal(env_actions, actor.action_map.env_actions(samples))
    expected = actor.action_map.log_probabilities(torch.from_numpy(means), torch.from_numpy(log_stds),
                                                  torch.from_numpy(samples))
    np.testing.assert_array_equal(behaviour, expected.numpy())


def test_an_actor_refuses_a_policy_whose_actions_are_not_numbers() -> None:
    actor = Actor.__new__(Actor)
    actor.action_map = ActionMap(ACTIONS, "clip")
    actor.sampling = np.random.Generator(np.random.PCG64(0))
    with pytest.raises(UsageError, match="training diverged: the policy's actions reached NaN"):
        actor._act((np.full((2, 2), np.nan, np.float32), np.zeros((2, 2), np.float32)))


# -- unrolls in the replays ----------------------------------------------------------------------------


LAYOUT = dict(unroll_length=T, observation_shape=OBSERVATION, observation_dtype=np.float32,
              num_actions=ACTIONS.count, feature_size=FEATURES, continuous=True)


def random_unroll(generator: np.random.Generator) -> dict:
    """As the mixer takes it: the behaviour's log-probabilities [T] under the name of its record, behaviour_logits."""
    return dict(observations=generator.normal(size=(T + 1, *OBSERVATION)).astype(np.float32),
                actions=generator.normal(size=(T, ACTIONS.count)).astype(np.float32),
                rewards=generator.normal(size=T).astype(np.float32), dones=generator.random(T) < 0.25,
                behaviour_logits=generator.normal(size=T).astype(np.float32),
                features=generator.normal(size=(T + 1, FEATURES)).astype(np.float32))


class CurrentFeatures:
    """Stands for the learner: current features drift from the stored ones with the index."""

    def current_features(self, storage, indices):
        return storage.features[indices] + 0.05 * np.asarray(indices, np.float32)[:, None]


@pytest.mark.parametrize("kind", ["queue", "standard", "elite"])
def test_continuous_unrolls_are_stored_sampled_and_restored(kind: str) -> None:
    settings = ReplaySection(kind=kind, capacity=8, ratio=1.0)
    replay = make_replay(kind, 8, 1.0, generator=3, item="unrolls", settings=settings, **LAYOUT)
    mixer = ReplayMixer([replay], 4)
    generator = np.random.default_rng(0)
    unrolls = [random_unroll(generator) for _ in range(8)]
    for unroll in unrolls:
        mixer.add_unroll(**unroll, feature_source=CurrentFeatures())
    batch = mixer.sample(4, features=CurrentFeatures())
    assert batch.continuous and batch.behaviour_logits is None
    assert batch.actions.shape == (T, 4, ACTIONS.count) and batch.actions.dtype == np.float32
    assert batch.behaviour_log_probs.shape == (T, 4)
    for column, index in enumerate(batch.indices):
        np.testing.assert_array_equal(batch.actions[:, column], unrolls[index]["actions"])
        np.testing.assert_array_equal(batch.behaviour_log_probs[:, column], unrolls[index]["behaviour_logits"])
    restored = make_replay(kind, 8, 1.0, generator=3, item="unrolls", settings=settings, **LAYOUT)
    restored.load_state_dict(replay.state_dict())
    np.testing.assert_array_equal(restored.storage.behaviour_log_probs, replay.storage.behaviour_log_probs)
    np.testing.assert_array_equal(restored.storage.actions, replay.storage.actions)


def test_a_continuous_storage_refuses_a_discrete_ones_state_and_has_no_logits() -> None:
    continuous = UnrollStorage(4, **LAYOUT)
    discrete = UnrollStorage(4, **{**LAYOUT, "continuous": False})
    discrete.add(**{**random_unroll(np.random.default_rng(0)), "actions": np.zeros(T, np.int64),
                    "behaviour_logits": np.zeros((T, ACTIONS.count), np.float32)})
    with pytest.raises(ValueError, match="layout"):
        continuous.load_state_dict(discrete.state_dict())
    with pytest.raises(ValueError, match="kl_div compares the policies of discrete actions"):
        continuous.logits


def test_kl_div_is_refused_for_continuous_actions_in_one_sentence() -> None:
    spec = JobSpec(replay=[ReplaySection(kind="elite", capacity=8, ratio=1.0, distance="kl_div")])
    with pytest.raises(UsageError, match=r"\[\[replay\]\] 1 distance: kl_div compares the policies of discrete actions") as raised:
        refuse_logits_distance(spec, ACTIONS)
    assert "\n" not in str(raised.value)
    refuse_logits_distance(spec, ActionSpace(4))  # discrete actions keep kl_div


# -- observation normalisation -----------------------------------------------------------------------------


def test_a_normalised_network_standardises_and_clips_with_statistics_that_travel_with_its_weights() -> None:
    settings = replace(SETTINGS, normalize_observations=True)
    network = policy_value_network_of(settings, OBSERVATION, ACTIONS.count, continuous=True)
    torso = network.torso
    assert isinstance(torso, NormalisedTorso) and not torso.observation_mean.requires_grad
    with torch.no_grad():
        torso.observation_mean.copy_(torch.tensor([1.0, 2.0, 3.0]))
        torso.observation_std.copy_(torch.tensor([2.0, 0.5, 1e-3]))
    observations = torch.tensor([[3.0, 1.0, 4.0]])
    inner = torso.torso(torch.tensor([[1.0, -2.0, NormalisedTorso.CLIP]]))
    torch.testing.assert_close(torso(observations), inner)
    actor = policy_value_network_of(settings, OBSERVATION, ACTIONS.count, continuous=True)
    WeightsBuffer(network, shared=False).load_into(actor, known_version=-1)
    assert fingerprint(actor) == fingerprint(network)
    discrete = policy_value_network_of(settings, OBSERVATION, 4)
    assert isinstance(discrete.torso, NormalisedTorso) and discrete(observations).logits.shape == (1, 4)


def test_normalised_observations_are_refused_for_images_in_one_sentence() -> None:
    spec = JobSpec(vtrace=replace(SETTINGS, normalize_observations=True))
    with pytest.raises(UsageError, match=r"standardises vector observations, and CartPole-v1's are images of shape "
                                         r"\(4, 84, 84\)"):
        observation_moments(spec, (4, 84, 84))
    assert observation_moments(spec, (3,)).mean.shape == (3,)
    assert observation_moments(JobSpec(), (3,)) is None
