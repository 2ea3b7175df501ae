"""IMPALA: a V-trace learner fed by actors (processes, or inline in serial mode) through replays mixed by ratio."""
from __future__ import annotations

import time
from collections import deque
from typing import Callable

import numpy as np
import torch

from rlsup.algos import vtrace
from rlsup.algos.actor_processes import ActorProcesses
from rlsup.algos.actors import Actors, Delivery, SerialActors
from rlsup.algos.contract import LearnerTrainer, Policy
from rlsup.algos.device import UsageError
from rlsup.algos.envs.actions import ActionSpace
from rlsup.algos.envs.training import describe, probe_env
from rlsup.algos.gaussian import ActionMap, MeanActions
from rlsup.algos.episodes import EpisodeReturns
from rlsup.algos.loss_sums import LossSums
from rlsup.algos.nets import (PolicyValueNetwork, fingerprint, gradient_step, greedy_actions_module, numpy_policy,
                              policy_value_network_of)
from rlsup.algos.optimizers import RMSprop
from rlsup.algos.running_statistics import RunningMoments
from rlsup.algos.schedules import LinearSchedule
from rlsup.algos.shared_memory import UnrollLayout
from rlsup.replay.mixer import ReplayMixer, replay_from_settings
from rlsup.replay.unrolls import UnrollBatch
from rlsup.spec.rules import logits_distance_violations
from rlsup.spec import JobSpec, VtraceSection

# How long iterate() waits for actors when there is nothing to train on: short, so a pause is prompt.
RECEIVE_WAIT_S = 0.1
# States per forward pass when elite replay asks for the current network's view of stored unrolls.
FEATURE_CHUNK = 4096
LOSS_NAMES = ("total_loss", "pg_loss", "baseline_loss", "entropy_loss", "entropy", "mean_value", "mean_rho",
              "grad_norm", "clipped")


class VtraceLearner:
    """The policy/value network on the job's device, RMSProp, and the V-trace update of one batch."""

    def __init__(self, settings: VtraceSection, network: PolicyValueNetwork, device: torch.device,
                 actions: ActionSpace | None = None):
        self.settings = settings
        self.device = device
        # Continuous actions: the map from the Gaussian's samples to the env's actions, and their densities.
        self.action_map = ActionMap(actions, settings.squash) if actions is not None and actions.continuous else None
        self.network = network.to(device)
        self.optimizer = RMSprop(self.network.parameters(), lr=settings.lr, alpha=settings.rmsprop_alpha,
                                 eps=settings.rmsprop_eps, momentum=settings.rmsprop_momentum)
        # Absolute steps: a raised budget leaves the learning rate of the steps already taken alone.
        self.learning_rate = LinearSchedule(settings.lr, settings.lr_end, settings.lr_end_step)
        self.updates = 0

    def update(self, batch: UnrollBatch, step: int) -> dict[str, torch.Tensor]:
        """One gradient step on a time-major batch, at the learning rate of absolute step `step`; its losses and
        statistics as scalars on the device (read by LossSums, once per metrics line)."""
        if self.action_map is not None:
            return self._update_continuous(batch, step)
        settings = self.settings
        length, size = batch.actions.shape
        output = self.network(self.as_tensor(batch.observations).flatten(0, 1))
        logits = output.logits.view(length + 1, size, -1)[:-1]  # the last state only bootstraps
        values = output.values.view(length + 1, size)
        actions = self.as_tensor(batch.actions)
        behaviour = vtrace.action_log_probabilities(self.as_tensor(batch.behaviour_logits), actions)
        log_rhos = vtrace.action_log_probabilities(logits.detach(), actions) - behaviour
        discounts = (~self.as_tensor(batch.dones)).float() * settings.gamma
        returns = vtrace.from_importance_weights(log_rhos, discounts, self.as_tensor(batch.rewards),
                                                 values[:-1].detach(), values[-1].detach(), settings.rho_clip,
                                                 settings.pg_rho_clip, settings.c_clip)
        losses = {"pg_loss": vtrace.policy_gradient_loss(logits, actions, returns.pg_advantages),
                  "baseline_loss": settings.baseline_cost * vtrace.baseline_loss(returns.vs - values[:-1]),
                  "entropy_loss": settings.entropy_cost * vtrace.entropy_loss(logits)}
        return self._step(losses, step, lambda: -vtrace.entropy_loss(logits) / (length * size), values, log_rhos)

    def _update_continuous(self, batch: UnrollBatch, step: int) -> dict[str, torch.Tensor]:
        """update() for a Gaussian policy: the ratio from the stored log μ(a|x), the Gaussian's entropy."""
        settings, action_map = self.settings, self.action_map
        length, size = batch.actions.shape[:2]
        output = self.network(self.as_tensor(batch.observations).flatten(0, 1))
        means = output.means.view(length + 1, size, -1)[:-1]  # the last state only bootstraps
        log_stds = output.log_stds.view(length + 1, size, -1)[:-1]
        values = output.values.view(length + 1, size)
        log_probabilities = action_map.log_probabilities(means, log_stds, self.as_tensor(batch.actions))
        log_rhos = log_probabilities.detach() - self.as_tensor(batch.behaviour_log_probs)
        discounts = (~self.as_tensor(batch.dones)).float() * settings.gamma
        returns = vtrace.from_importance_weights(log_rhos, discounts, self.as_tensor(batch.rewards),
                                                 values[:-1].detach(), values[-1].detach(), settings.rho_clip,
                                                 settings.pg_rho_clip, settings.c_clip)
        entropies = action_map.entropies(log_stds)
        losses = {"pg_loss": -torch.sum(log_probabilities * returns.pg_advantages),
                  "baseline_loss": settings.baseline_cost * vtrace.baseline_loss(returns.vs - values[:-1]),
                  "entropy_loss": -settings.entropy_cost * torch.sum(entropies)}
        return self._step(losses, step, lambda: entropies.mean(), values, log_rhos)

    def _step(self, losses: dict[str, torch.Tensor], step: int, entropy: Callable[[], torch.Tensor],
              values: torch.Tensor, log_rhos: torch.Tensor) -> dict[str, torch.Tensor]:
        """The gradient step on the losses' sum, and the update's statistics (entropy: the policy's mean)."""
        settings = self.settings
        total_loss = sum(losses.values())
        # The norm before clipping, and the share of updates clipped: a clip that binds on every update (sums
        # over the batch of unclipped rewards) turns the step into a normalised one, which the metrics show.
        norm = gradient_step(self.optimizer, total_loss, self.network.parameters(),
                             learning_rate=self.learning_rate(step), max_grad_norm=settings.max_grad_norm,
                             measure_norm=True)
        self.updates += 1
        with torch.no_grad():
            # On the norm's device, as every scalar here: LossSums stacks them without a copy.
            clipped = (norm > settings.max_grad_norm).float() if settings.max_grad_norm > 0 else torch.zeros_like(norm)
            return {"total_loss": total_loss.detach(), **{name: loss.detach() for name, loss in losses.items()},
                    "entropy": entropy().detach(), "mean_value": values.mean(), "mean_rho": log_rhos.exp().mean(),
                    "grad_norm": norm, "clipped": clipped}

    @torch.no_grad()
    def greedy_actions(self, observations: np.ndarray) -> np.ndarray:
        """The argmax of the logits, or for continuous actions the Gaussian's mean as the env's action."""
        output = self.network(self.as_tensor(observations))
        if self.action_map is None:
            return output.logits.argmax(dim=1).cpu().numpy()
        return self.action_map.env_actions_tensor(output.means).cpu().numpy()

    def as_tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array).to(self.device, non_blocking=True)

    def fingerprint(self) -> str:
        return fingerprint(self.network)

    def state_dict(self) -> dict:
        return {"network": self.network.state_dict(), "optimizer": self.optimizer.state_dict(),
                "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.network.load_state_dict(state["network"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


class LearnerFeatures:
    """Elite replay's FeatureSource: the learner network's current view of stored unrolls."""

    def __init__(self, learner: VtraceLearner):
        self.learner = learner

    def current_features(self, storage, indices: np.ndarray) -> np.ndarray:
        """[n, (T+1)·F]: feature-head outputs for every state of each unroll, flattened like storage.features."""
        features = self._forward(storage, indices, lambda output: output.features)
        return features.reshape(len(indices), -1)

    def current_logits(self, storage, indices: np.ndarray) -> np.ndarray:
        """[n, T, A]: policy logits for the acting states of each unroll, shaped like storage.logits."""
        logits = self._forward(storage, indices, lambda output: output.logits)
        return logits[:, :-1]

    @torch.no_grad()
    def _forward(self, storage, indices: np.ndarray, pick: Callable) -> np.ndarray:
        observations = storage.observations[np.asarray(indices, np.int64)]  # [n, T+1, *obs]
        flat = observations.reshape(-1, *observations.shape[2:])
        outputs = [pick(self.learner.network(self.learner.as_tensor(flat[start:start + FEATURE_CHUNK]))).cpu()
                   for start in range(0, len(flat), FEATURE_CHUNK)]
        return torch.cat(outputs).numpy().astype(np.float32).reshape(*observations.shape[:2], -1)


def build_unroll_replays(spec: JobSpec, layout: UnrollLayout) -> ReplayMixer:
    """One unroll storage and sampler per [[replay]] table, each sampler with its own random stream."""
    seeds = np.random.SeedSequence(spec.job.seed).spawn(len(spec.replay))
    replays = [replay_from_settings(settings, generator=np.random.Generator(np.random.PCG64(seed)), item="unrolls",
                                    unroll_length=layout.unroll_length, observation_shape=layout.observation_shape,
                                    observation_dtype=layout.observation_dtype, num_actions=layout.num_actions,
                                    feature_size=layout.feature_size, continuous=layout.continuous)
               for settings, seed in zip(spec.replay, seeds)]
    return ReplayMixer(replays, spec.vtrace.batch_size)


def refuse_logits_distance(spec: JobSpec, actions: ActionSpace) -> None:
    """The rule check_env applies, again where the trainer is built (a worker may be given a job never checked)."""
    for violation in logits_distance_violations(spec.replay, actions.continuous):
        raise UsageError(f"[[replay]] {violation.table + 1} distance: {violation.message} ({spec.env.id} has "
                         f"{actions.describe()})")


def observation_moments(spec: JobSpec, observation_shape: tuple) -> RunningMoments | None:
    """The running moments of the observations when [vtrace] normalize_observations asks for them (vectors only)."""
    if not spec.vtrace.normalize_observations:
        return None
    if len(observation_shape) != 1:
        raise UsageError(f"[vtrace] normalize_observations standardises vector observations, and {spec.env.id}'s are "
                         f"images of shape {tuple(observation_shape)}, which the network scales to [0, 1] already")
    return RunningMoments(tuple(observation_shape))


class VtraceTrainer(LearnerTrainer):
    """Moves actors' unrolls into the replays, trains on batches mixed by ratio, and publishes the weights.

    `step` counts the env steps the learner has consumed (unroll_length × batch_size per update), so
    budgets, schedules and checkpoints fall on update boundaries.
    """

    def __init__(self, spec: JobSpec, device: torch.device):
        self.spec = spec
        settings = spec.vtrace
        observation_shape, observation_dtype, num_actions, _ = probe_env(spec.env)
        actions = describe(spec.env).actions
        refuse_logits_distance(spec, actions)
        self.layout = UnrollLayout(settings.envs_per_actor, settings.unroll_length, tuple(observation_shape),
                                   np.dtype(observation_dtype), num_actions, settings.feature_size,
                                   actions.continuous)
        torch.manual_seed(spec.job.seed)
        network = policy_value_network_of(settings, observation_shape, num_actions, continuous=actions.continuous)
        self.learner = VtraceLearner(settings, network, device, actions)
        self.feature_source = LearnerFeatures(self.learner)
        self.replays = build_unroll_replays(spec, self.layout)
        self.step = 0
        self.returns = EpisodeReturns()
        self.observation_moments = observation_moments(spec, observation_shape)
        self.unrolls = 0
        self.loss_sums = LossSums(LOSS_NAMES)
        # Rounds received but not yet all in the replays (a full queue), and how far into the first one.
        self.pending: deque[Delivery] = deque()
        self.pending_position = 0
        # Both are made here, so that a restore reaches serial actors; both start at the first iterate.
        actors = SerialActors if settings.serial else ActorProcesses  # where the two modes differ
        self.actors: Actors = actors(spec, self.layout, self.learner.network)
        self.actors_started = False
        self.waited_seconds = 0.0  # in receive: how long the learner waited for the actors (not checkpointed)

    # -- training ----------------------------------------------------------------------------

    def iterate(self) -> list[dict]:
        """Take the actors' finished rounds, fill the replays, and make one update when they are ready."""
        actors = self._started_actors()
        # A round held back by a full queue refills it first: waiting on the actors then would wait for
        # nothing, since an actor whose groups are all held here cannot deliver (serial: none is held).
        self._insert_pending()
        wait = 0.0 if self.replays.ready() else RECEIVE_WAIT_S
        began = time.perf_counter()
        deliveries = actors.receive(wait)
        self.waited_seconds += time.perf_counter() - began  # the learner idle, for bench/vtrace_throughput.py
        records = [record for delivery in deliveries for record in self._accept(delivery)]
        self._insert_pending()
        if self.replays.ready():
            self._update()
        # Serial mode leaves nothing in flight between iterations: a checkpoint then holds the whole run.
        # The update above may have drained a queue smaller than a round: refill it before the next one
        # (inserting always progresses, so this ends; ready runs never skip an update, so trajectories stay).
        while self.spec.vtrace.serial and self.pending:
            if self.replays.ready():
                self._update()
            self._insert_pending()
        return records

    def _started_actors(self) -> Actors:
        if not self.actors_started:
            self.actors.start(generation=self.learner.updates)  # after any restore: see Actors.start
            self.actors_started = True
        return self.actors

    def _accept(self, delivery: Delivery) -> list[dict]:
        self.pending.append(delivery)
        records = []
        for episode in delivery.episodes:
            self.returns.add(episode["return"])
            records.append({**episode, "step": self.step})
        return records

    def _insert_pending(self) -> None:
        """Unrolls into every replay in arrival order, until done or a queue is full and ready to sample."""
        while self.pending:
            delivery = self.pending[0]
            arrays = self.actors.arrays(delivery.group)
            while self.pending_position < self.layout.envs:
                if self.replays.free() == 0:
                    if self.replays.ready():
                        return  # back-pressure: the actors wait on free slots until an update drains the queue
                    self.replays.drop_oldest_queued()
                self.replays.add_unroll(**arrays.unroll(self.pending_position), feature_source=self.feature_source)
                if self.observation_moments is not None:  # the last state is the next unroll's first: once each
                    self.observation_moments.update(arrays.observations[self.pending_position, :-1])
                self.pending_position += 1
                self.unrolls += 1
            self.pending.popleft()
            self.pending_position = 0
            self.actors.release(delivery.group)

    def _update(self) -> None:
        settings = self.spec.vtrace
        if self.observation_moments is not None:
            self._standardise_with(self.observation_moments)
        batch = self.replays.sample(settings.batch_size, features=self.feature_source, step=self.step)
        self.loss_sums.add(self.learner.update(batch, self.step))
        self.step += settings.unroll_length * settings.batch_size
        self.actors.publish(self.learner.network)

    @torch.no_grad()
    def _standardise_with(self, moments: RunningMoments) -> None:
        """The network's observation statistics set to the moments of every observation stored so far: the learner
        trains, and the actors act after the publish that follows, on the same standardised inputs."""
        torso = self.learner.network.torso
        torso.observation_mean.copy_(torch.as_tensor(moments.mean, dtype=torch.float32))
        torso.observation_std.copy_(torch.as_tensor(moments.std(), dtype=torch.float32))

    # -- the rest of the Trainer contract (algos/contract.py) --------------------------------

    def train_metrics(self) -> dict:
        """Averages since the previous call, for a `train` line of metrics.jsonl."""
        metrics = {"lr": self.learner.learning_rate(self.step), "updates": self.learner.updates,
                   "episodes": self.episodes, "unrolls": self.unrolls, "mean_return": self.mean_return()}
        for number, replay in enumerate(self.replays.replays):
            metrics[f"replay{number}_size"] = len(replay.storage)
            metrics.update({f"replay{number}_{name}": value for name, value in replay.sampler.metrics().items()})
        metrics.update(self.loss_sums.means())
        return metrics

    def state_dict(self, *, include_replay: bool = True) -> dict:
        """Learner, counters and replays; actors only in serial mode.

        In parallel mode the actors' envs and the rounds not yet in a replay are left out and lost
        on resume: the actor count may change then, and asynchronous actors are not reproducible anyway.
        """
        state = {
            "learner": self.learner.state_dict(),
            "counters": {"step": self.step, "unrolls": self.unrolls},
            **({} if self.observation_moments is None
               else {"observation_moments": self.observation_moments.state_dict()}),
            "episodes": self.returns.state_dict(),
            "metrics": {"loss_sums": self.loss_sums.totals(), "loss_count": self.loss_sums.count},
        }
        if include_replay:
            state["replay"] = self.replays.state_dict()
        actors = self.actors.state_dict()
        if actors is not None:
            state["actors"] = actors
        return state

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["learner"])
        counters, metrics = state["counters"], state["metrics"]
        self.step, self.unrolls = int(counters["step"]), int(counters["unrolls"])
        self.returns.load_state_dict(state["episodes"])
        self.loss_sums.load(metrics["loss_sums"], metrics["loss_count"])
        if "replay" in state:
            self.replays.load_state_dict(state["replay"])
        if self.observation_moments is not None:
            self.observation_moments.load_state_dict(state["observation_moments"])
        if "actors" in state:
            self.env_restarts = tuple(self.actors.load_state_dict(state["actors"]))
        self.actors.publish(self.learner.network)

    def close(self) -> None:
        self.actors.close()


def greedy_network(spec: JobSpec, trainer_state: dict) -> torch.nn.Module:
    """The greedy CPU policy of a checkpoint as a module (what export writes): the argmax of the policy logits, or
    for continuous actions the Gaussian's mean mapped into the action bounds."""
    observation_shape, _, num_actions, _ = probe_env(spec.env)
    actions = describe(spec.env).actions
    network = policy_value_network_of(spec.vtrace, observation_shape, num_actions, continuous=actions.continuous)
    if not actions.continuous:
        return greedy_actions_module(network, trainer_state["learner"]["network"], logits=True)
    network.load_state_dict(trainer_state["learner"]["network"])
    return MeanActions(network, ActionMap(actions, spec.vtrace.squash)).eval().requires_grad_(False)


def policy_from_checkpoint(spec: JobSpec, trainer_state: dict) -> Policy:
    """The greedy CPU policy of a checkpoint (what enjoy plays): greedy_network on numpy arrays."""
    return numpy_policy(greedy_network(spec, trainer_state))
