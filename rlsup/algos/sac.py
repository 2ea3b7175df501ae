"""SAC: the loop that feeds its learner (sac_learner.py) from side-by-side envs with continuous actions."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlsup.algos.contract import LearnerTrainer, Policy
from rlsup.algos.dqn import SCORED_KINDS, build_replays
from rlsup.algos.envs.sources import describe_env
from rlsup.algos.envs.vectorise import env_seeds, make_vector_env
from rlsup.algos.episodes import EpisodeReturns
from rlsup.algos.loss_sums import LossSums
from rlsup.algos.nets import numpy_policy
from rlsup.algos.sac_learner import LOSS_NAMES, SacLearner, SacParameters
from rlsup.algos.sac_networks import SquashedGaussianPolicy, Temperature, critic_of, policy_of
from rlsup.algos.schedules import crossed
from rlsup.algos.transition_loop import TransitionLoop
from rlsup.replay.storage import TransitionBatch, TransitionStorage
from rlsup.spec import JobSpec


class PolicyFeatures:
    """FeatureSource for elite and attentive replay: the policy torso's view of stored transitions, now."""

    def __init__(self, learner: SacLearner) -> None:
        self.learner = learner

    def current_features(self, storage: TransitionStorage, indices: np.ndarray) -> np.ndarray:
        return self.learner.features(storage.observations_at(indices))


class SacTrainer(TransitionLoop, LearnerTrainer):
    """Steps the envs as one batch with the policy's sampled actions (uniform ones before learning_starts),
    stores transitions, and trains on the schedule.

    Every random stream is its own, spawned from the job seed: env seeds, exploration (the uniform
    actions and the acting noise), the learner's noise and each replay's sampler.
    """

    def __init__(self, spec: JobSpec, device: torch.device):
        self.spec = spec
        settings = spec.sac
        seed_sequence = np.random.SeedSequence(spec.job.seed)
        seeds = env_seeds(seed_sequence, spec.env.num_envs)
        exploration_seed, learner_seed = seed_sequence.spawn(2)
        replay_seeds = seed_sequence.spawn(len(spec.replay))
        self.envs = make_vector_env(spec.env, seeds)
        self.actions = self.envs.actions
        if not self.actions.continuous:
            raise ValueError(f"sac trains continuous actions; {spec.env.id} has {self.actions.describe()}")
        torch.manual_seed(spec.job.seed)
        self.low, self.high = self.actions.bounds()
        policy = policy_of(settings, self.envs.observation_shape, self.low, self.high)
        parameters = SacParameters(policy, critic_of(settings, self.envs.observation_shape, self.actions.count),
                                   Temperature(settings.temperature))
        self.learner = SacLearner(settings, parameters, self.actions.count, device,
                                  seed=int(learner_seed.generate_state(1)[0]))
        self.replays = build_replays(spec, self.envs, replay_seeds, policy.torso.output_size,
                                     action_size=self.actions.count)
        self.scored = any(replay.kind in SCORED_KINDS for replay in spec.replay)
        self.feature_source = PolicyFeatures(self.learner) if self.scored else None
        self.exploration = np.random.Generator(np.random.PCG64(exploration_seed))
        self.step = 0
        self.returns = EpisodeReturns()
        self.loss_sums = LossSums(LOSS_NAMES)
        self.observations = self.envs.reset()
        self.first = [True] * self.envs.num_envs

    def iterate(self) -> list[dict]:
        """One step of every env (one batch, one forward), then the gradient steps due."""
        previous_step = self.step
        records = self._act_and_store()
        self.step += self.envs.num_envs
        for _ in range(self._gradient_steps_due(previous_step, self.step)):
            self.loss_sums.add(self.learner.update(self._sample()))
        return records

    def _act_and_store(self) -> list[dict]:
        actions, features = self._choose_actions()
        result = self.envs.step(actions)
        records = [record for index in range(self.envs.num_envs)
                   if (record := self._store(index, actions[index], result,
                                             None if features is None else features[index]))]
        self.observations = result.observations
        return records

    def _choose_actions(self) -> tuple[np.ndarray, np.ndarray | None]:
        """This step's actions, and the policy torso's features of the observations when a replay scores them."""
        # Both draws every step, so that the stream's consumption never depends on the phase.
        shape = (self.envs.num_envs, self.actions.count)
        uniform = self.exploration.uniform(self.low, self.high, size=shape).astype(np.float32)
        noise = self.exploration.standard_normal(shape, dtype=np.float32)
        if self.step >= self.spec.sac.learning_starts:
            actions, features = self.learner.sampled_actions(self.observations, noise)
            return actions, features if self.scored else None
        return uniform, self.learner.features(self.observations) if self.scored else None

    def _gradient_steps_due(self, previous_step: int, step: int) -> int:
        settings = self.spec.sac
        if step < settings.learning_starts or not crossed(previous_step, step, settings.train_every):
            return 0
        minimums = [replay.min_size or share for replay, share in zip(self.replays.replays, self.replays.shares)]
        return settings.gradient_steps if self.replays.ready(minimums, settings.n_step) else 0

    def _sample(self) -> TransitionBatch:
        settings = self.spec.sac
        return self.replays.sample(settings.batch_size, settings.n_step, settings.gamma, self.feature_source,
                                   self.step)

    def train_metrics(self) -> dict:
        """Averages since the previous call, for a `train` line of metrics.jsonl."""
        metrics = {"lr": self.spec.sac.lr_actor, "updates": self.learner.updates, "episodes": self.episodes,
                   "mean_return": self.mean_return()}
        metrics.update(self.loss_sums.means())
        return metrics

    def state_dict(self, *, include_replay: bool = True) -> dict:
        return {"learner": self.learner.state_dict(),
                "metrics": {"sums": self.loss_sums.totals(), "count": self.loss_sums.count},
                **self._loop_state(include_replay)}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["learner"])
        self.loss_sums.load(state["metrics"]["sums"], state["metrics"]["count"])
        restarts = self._load_loop_state(state)
        self._start_fresh_episodes(restarts, replay_loaded="replay" in state)

    def close(self) -> None:
        self.envs.close()


def greedy_network(spec: JobSpec, trainer_state: dict) -> nn.Module:
    """The deterministic CPU policy of a checkpoint (the squashed mean action, in the env's bounds): what
    export writes and enjoy plays."""
    description = describe_env(spec.env)
    low, high = description.actions.bounds()
    parameters = SacParameters(policy_of(spec.sac, description.observation.shape, low, high),
                               critic_of(spec.sac, description.observation.shape, description.actions.count),
                               Temperature(spec.sac.temperature))
    parameters.load_state_dict(trainer_state["learner"]["parameters"])
    policy: SquashedGaussianPolicy = parameters.policy
    return policy.eval().requires_grad_(False)


def policy_from_checkpoint(spec: JobSpec, trainer_state: dict) -> Policy:
    return numpy_policy(greedy_network(spec, trainer_state))
