"""V-trace actors: the unroll loop that serial and parallel modes share, the Actors protocol and the serial actors."""
from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.gaussian import ActionMap
from rlsup.algos.loss_sums import Diverged
from rlsup.algos.nets import PolicyValueNetwork, policy_value_network_of
from rlsup.algos.running_statistics import RewardScale
from rlsup.algos.shared_memory import UnrollArrays, UnrollGroups, UnrollLayout, WeightsBuffer
from rlsup.algos.envs.vector import VectorStep
from rlsup.algos.envs.vectorise import env_seeds, make_vector_env
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.run import metrics as records
from rlsup.spec import JobSpec

# Seed-sequence key of the actors' streams, apart from the learner's (spawned from the bare job seed).
ACTOR_SEED_KEY = 1


class Delivery(NamedTuple):
    """A finished round: which group of slots holds its unrolls, and the episodes that ended in it."""

    group: int
    actor: int
    episodes: list[dict]


def actor_seed(job_seed: int, actor: int, generation: int = 0) -> np.random.SeedSequence:
    """The root of one actor's streams: its env seeds and its action sampling."""
    return np.random.SeedSequence(job_seed, spawn_key=(ACTOR_SEED_KEY, actor, generation))


def build_actor_network(spec: JobSpec, observation_shape: tuple, actions: ActionSpace) -> PolicyValueNetwork:
    # Its initial weights are overwritten by the first load; fork_rng keeps building it from using up
    # the process's global torch stream, which in serial mode is the learner's.
    with torch.random.fork_rng(devices=[]):
        network = policy_value_network_of(spec.vtrace, observation_shape, actions.count,
                                          continuous=actions.continuous)
    return network.requires_grad_(False).eval()


class Actor:
    """Steps envs_per_actor envs as one batch with a CPU copy of the policy (one forward per step) and
    writes one unroll per env each round.

    Consecutive unrolls overlap by one state: the last observation of one is the first of the next.
    """

    def __init__(self, spec: JobSpec, index: int, seed: np.random.SeedSequence):
        settings = spec.vtrace
        # Envs first, then sampling: the order of these spawns fixes the run.
        seeds = env_seeds(seed, settings.envs_per_actor)
        sampling_seed = seed.spawn(1)[0]
        self.index = index
        self.unroll_length = settings.unroll_length
        self.discount = settings.gamma
        # Actor processes share the machine: each vector may use its share of the CPUs (see choose_vectoriser).
        self.envs = make_vector_env(spec.env, seeds, sharers=1 if settings.serial else settings.actors)
        actions = self.envs.actions
        self.network = build_actor_network(spec, self.envs.observation_shape, actions)
        self.action_map = ActionMap(actions, settings.squash) if actions.continuous else None
        self.sampling = np.random.Generator(np.random.PCG64(sampling_seed))
        self.weights_version = -1
        self.observations = self.envs.reset()
        # Each actor keeps its own statistics: in a parallel run they need no traffic with the learner.
        self.reward_scale = RewardScale(settings.envs_per_actor, settings.gamma) if settings.normalize_rewards else None
        self.cached_output: tuple | None = None  # (the policy's outputs, features) of self.observations

    def unroll(self, weights: WeightsBuffer, arrays: UnrollArrays) -> list[dict]:
        """One round: unroll_length steps of every env, written into arrays; returns the finished episodes."""
        self._refresh_weights(weights)
        policy, features = self.cached_output or self._forward(self.observations)
        episodes = []
        for time_step in range(self.unroll_length):
            arrays.observations[:, time_step] = self.observations
            arrays.features[:, time_step] = features
            actions, behaviour, env_actions = self._act(policy)
            arrays.behaviour_logits[:, time_step] = behaviour
            arrays.actions[:, time_step] = actions
            result = self.envs.step(env_actions)
            self._store(result, arrays, time_step)
            episodes.extend({records.KIND: records.EPISODE, records.EPISODE_RETURN: episode.raw_return,
                             records.EPISODE_LENGTH: episode.length}
                            for _, episode in sorted(result.episodes.items()))
            self.observations = result.observations
            policy, features = self._forward(self.observations)
        arrays.observations[:, self.unroll_length] = self.observations
        arrays.features[:, self.unroll_length] = features
        # The next round acts first on these same observations: reuse this pass unless the weights change.
        self.cached_output = (policy, features)
        return episodes

    def _refresh_weights(self, weights: WeightsBuffer) -> None:
        version = weights.load_into(self.network, self.weights_version)
        if version != self.weights_version:
            self.weights_version, self.cached_output = version, None

    def _store(self, result: VectorStep, arrays: UnrollArrays, time_step: int) -> None:
        rewards = result.rewards.copy()
        if self.reward_scale is not None:  # before the bootstrap below, which is already in the value's units
            rewards = self.reward_scale(rewards, result.dones)
        for env_index, final_observation in result.final_observations.items():
            if result.truncated[env_index] and not result.terminals[env_index]:
                # A time limit is not the end of the task, but the next state stored is the new episode's:
                # fold the bootstrap from the true last state into the reward (Pardo et al. 2018). One
                # forward per such env, not one batch: a batch of another size may round differently.
                rewards[env_index] += self.discount * self._value(final_observation)
        arrays.rewards[:, time_step] = rewards
        # A lost life cuts the bootstrap too; after a done the next observation is a new episode's.
        arrays.dones[:, time_step] = result.terminals | result.dones

    @torch.no_grad()
    def _value(self, observation: np.ndarray) -> float:
        return float(self.network(torch.from_numpy(observation[None])).values[0])

    @torch.no_grad()
    def _forward(self, observations: np.ndarray) -> tuple:
        """(the policy's outputs: logits, or a Gaussian's means and log standard deviations), features."""
        output = self.network(torch.from_numpy(observations))
        if self.action_map is None:
            return output.logits.numpy(), output.features.numpy()
        return (output.means.numpy(), output.log_stds.numpy()), output.features.numpy()

    def _act(self, policy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the actions stored, the behaviour stored with them, what the envs are given) for one step."""
        if self.action_map is None:
            actions = self._sample(policy)
            return actions, policy, actions
        samples, log_probabilities = self._sample_gaussian(*policy)
        return samples, log_probabilities, self.action_map.env_actions(samples)

    @torch.no_grad()
    def _sample_gaussian(self, means: np.ndarray, log_stds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """u = μ + σ ε per env, ε from the actor's own stream, and log μ(a|x) of the action u becomes."""
        noise = self.sampling.standard_normal(means.shape)
        samples = (means + np.exp(log_stds) * noise).astype(np.float32)
        if not np.isfinite(samples).all():
            raise Diverged("training diverged: the policy's actions reached NaN or infinity, and the weights with "
                           "it; fork the newest checkpoint with a lower lr or a max_grad_norm "
                           "(rlsup fork RUN NEW.toml)")
        log_probabilities = self.action_map.log_probabilities(torch.from_numpy(means), torch.from_numpy(log_stds),
                                                              torch.from_numpy(samples))
        return samples, log_probabilities.numpy()

    def _sample(self, logits: np.ndarray) -> np.ndarray:
        """One action per env from softmax(logits), by inverse CDF on one uniform draw each."""
        shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
        probabilities = np.exp(shifted)
        cumulative = np.cumsum(probabilities / probabilities.sum(axis=1, keepdims=True), axis=1)
        uniforms = self.sampling.random(len(logits))
        actions = (uniforms[:, None] >= cumulative).sum(axis=1)
        return np.minimum(actions, logits.shape[1] - 1).astype(np.int64)

    def state_dict(self) -> dict:
        """Envs mid-episode, their observations and the sampling stream; the weights come from the learner."""
        state = {"envs": self.envs.state_dict(),
                 "observations": self.observations.copy(), "sampling": generator_state(self.sampling)}
        if self.reward_scale is not None:
            state["reward_scale"] = self.reward_scale.state_dict()
        return state

    def load_state_dict(self, state: dict) -> list[str]:
        """Continue from state_dict(); returns a sentence per env that had to start a fresh episode."""
        restarts = self.envs.load_state_dict(state["envs"])
        self.observations = np.array(state["observations"], dtype=self.observations.dtype)
        for restart in restarts:  # the next unroll starts on the fresh episode: no step joins the two
            self.observations[restart.index] = restart.observation
        self.sampling = restore_generator(state["sampling"])
        if self.reward_scale is not None and "reward_scale" in state:
            self.reward_scale.load_state_dict(state["reward_scale"])
        self.weights_version, self.cached_output = -1, None
        return [f"actor {self.index}, {restart.reason}" for restart in restarts]

    def close(self) -> None:
        self.envs.close()


class Actors(Protocol):
    """What the V-trace learner drives, SerialActors and ActorProcesses alike, so that it never asks which
    (sample-factory's runner_serial and runner_parallel over one runner)."""

    def start(self, generation: int) -> None:
        """Begin acting, after any restore; generation (the learner's update count) seeds actors that start
        afresh, so a resumed run's actors do not replay the first episodes."""

    def receive(self, timeout: float) -> list[Delivery]:
        """The rounds finished so far, waiting up to timeout for the first one."""

    def arrays(self, group: int) -> UnrollArrays:
        """The slots a delivered round was written into, valid until release(group)."""

    def release(self, group: int) -> None:
        """The learner has copied the round out: its slots may be written again."""

    def publish(self, network: nn.Module) -> None:
        """The learner's newest weights, for the rounds that start after this."""

    def state_dict(self) -> dict | None:
        """The actors' part of a checkpoint; None where they have none to give."""

    def load_state_dict(self, state: dict) -> list[str]:
        """Continue from state_dict(); returns a sentence per env that had to start a fresh episode."""

    def close(self) -> None:
        """Stop acting; nothing the actors started may outlive this."""


# ---- serial mode: the actors called inline ---------------------------------------------------------


class SerialActors:
    """Every actor in the learner's process, one round at a time in turn: debuggable and bit-exact."""

    def __init__(self, spec: JobSpec, layout: UnrollLayout, network: nn.Module):
        self.actors = [Actor(spec, index, actor_seed(spec.job.seed, index)) for index in range(spec.vtrace.actors)]
        self.groups = UnrollGroups(layout, 1, shared=False)
        self.weights = WeightsBuffer(network, shared=False)
        self.next_actor = 0

    def start(self, generation: int) -> None:
        """Nothing to start: the actors were made with the trainer, so that a restore reaches them."""

    def receive(self, timeout: float = 0.0) -> list[Delivery]:
        actor = self.actors[self.next_actor]
        episodes = actor.unroll(self.weights, self.groups.group(0))
        self.next_actor = (self.next_actor + 1) % len(self.actors)
        return [Delivery(0, actor.index, episodes)]

    def arrays(self, group: int) -> UnrollArrays:
        return self.groups.group(group)

    def release(self, group: int) -> None:
        """Nothing to hand back: the one group is rewritten by the next round."""

    def publish(self, network: nn.Module) -> None:
        self.weights.publish(network)

    def state_dict(self) -> dict:
        return {"next_actor": self.next_actor,
                "actors": {str(actor.index): actor.state_dict() for actor in self.actors}}

    def load_state_dict(self, state: dict) -> list[str]:
        """Continue from state_dict(); returns a sentence per env that had to start a fresh episode."""
        # The actor count may have changed since the pause: actors without saved state start afresh.
        saved = state["actors"]
        restarts = []
        for actor in self.actors:
            if str(actor.index) in saved:
                restarts += actor.load_state_dict(saved[str(actor.index)])
        self.next_actor = int(state["next_actor"]) % len(self.actors)
        return restarts

    def close(self) -> None:
        for actor in self.actors:
            actor.close()
