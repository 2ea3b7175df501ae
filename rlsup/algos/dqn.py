"""DQN (double, n-step): the loop that feeds its learner (dqn_learner.py) from side-by-side envs."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlsup.algos.contract import LearnerTrainer, Policy
from rlsup.algos.dqn_learner import DqnLearner
from rlsup.algos.envs.training import probe_env
from rlsup.algos.episodes import EpisodeReturns
from rlsup.algos.loss_sums import LossSums
from rlsup.algos.nets import greedy_actions_module, numpy_policy, q_network_of
from rlsup.algos.overlap import learner_rounds
from rlsup.algos.schedules import LinearSchedule, crossed
from rlsup.algos.transition_loop import TransitionLoop
from rlsup.algos.envs.vector import VectorEnv
from rlsup.algos.envs.vectorise import env_seeds, make_vector_env
from rlsup.replay.mixer import ReplayMixer, replay_from_settings
from rlsup.replay.storage import TransitionBatch, TransitionStorage
from rlsup.spec import JobSpec, ReplaySection

# Replay kinds that score items with the Q-network's penultimate features.
SCORED_KINDS = ("elite", "attentive")
# The scalars each gradient step reports, and the keys their sums have in a checkpoint.
LOSS_NAMES = ("loss", "q_mean")
SAVED_NAMES = {"loss": "loss_sum", "q_mean": "q_sum"}


class QNetworkFeatures:
    """FeatureSource for elite replay: the online Q-network's view of stored transitions, now."""

    def __init__(self, learner: DqnLearner) -> None:
        self.learner = learner

    def current_features(self, storage: TransitionStorage, indices: np.ndarray) -> np.ndarray:
        return self.learner.features_and_values(storage.observations_at(indices))[0]

    def current_logits(self, storage: TransitionStorage, indices: np.ndarray) -> np.ndarray:
        # Q-values play the logits: kl_div compares the softmax policies they induce.
        return self.learner.features_and_values(storage.observations_at(indices))[1]


def scoring_sizes(settings: ReplaySection, feature_size: int, num_actions: int) -> dict:
    """What a replay's storage keeps per row for scoring: features, or Q-values for kl_div; none if unscored."""
    if settings.kind not in SCORED_KINDS:
        return {}
    if settings.distance == "kl_div":
        return {"num_actions": num_actions}
    return {"feature_size": feature_size}


def build_replays(spec: JobSpec, env: VectorEnv, seeds: list[np.random.SeedSequence],
                  feature_size: int = 0, action_size: int = 0) -> ReplayMixer:
    """One transition storage and sampler per [[replay]] table, each sampler with its own random stream;
    action_size: the length of a continuous action (sac), 0 for discrete ones."""
    replays = [replay_from_settings(settings, generator=np.random.Generator(np.random.PCG64(seed)),
                                    num_envs=spec.env.num_envs, frame_shape=env.frame_shape,
                                    frame_dtype=env.observation_dtype, stack_size=env.stack_size,
                                    action_size=action_size, **scoring_sizes(settings, feature_size, env.num_actions))
               for settings, seed in zip(spec.replay, seeds)]
    return ReplayMixer(replays, spec.batch_size)


class DqnTrainer(TransitionLoop, LearnerTrainer):
    """Steps the envs as one batch with epsilon-greedy actions, stores transitions, and trains on the schedule.

    Every random stream is its own: env seeds, exploration and each replay's sampler are spawned
    from the job seed, so evaluation, logging and checkpointing cannot bend the trajectory.
    """

    def __init__(self, spec: JobSpec, device: torch.device):
        self.spec = spec
        settings = spec.dqn
        seed_sequence = np.random.SeedSequence(spec.job.seed)
        # Spawned in this order (envs, exploration, replays) since the first release: it fixes the run.
        seeds = env_seeds(seed_sequence, spec.env.num_envs)
        exploration_seed, replay_seeds = seed_sequence.spawn(1)[0], seed_sequence.spawn(len(spec.replay))
        self.envs = make_vector_env(spec.env, seeds)
        torch.manual_seed(spec.job.seed)
        network = q_network_of(settings, self.envs.observation_shape, self.envs.num_actions)
        self.learner = DqnLearner(settings, network, device)
        self.replays = build_replays(spec, self.envs, replay_seeds, network.torso.output_size)
        self.scored = any(replay.kind in SCORED_KINDS for replay in spec.replay)
        self.feature_source = QNetworkFeatures(self.learner) if self.scored else None
        # Features and Q-values of the observations the envs are about to act on (scored replays only).
        self.step_features: np.ndarray | None = None
        self.step_values: np.ndarray | None = None
        self.exploration = np.random.Generator(np.random.PCG64(exploration_seed))
        self.epsilon = LinearSchedule(settings.epsilon_start, settings.epsilon_end, settings.epsilon_end_step)
        self.step = 0
        self.returns = EpisodeReturns()
        self.loss_sums = LossSums(LOSS_NAMES)
        self.observations = self.envs.reset()
        self.first = [True] * self.envs.num_envs
        self.learner_rounds = learner_rounds(self.learner, device)
        self.round_losses: list[dict] = []  # of a round that ended but that the schedule has not closed yet

    @property
    def num_actions(self) -> int:
        return self.envs.num_actions

    def iterate(self) -> list[dict]:
        """One step of every env (one batch, one forward), then the gradient steps and target updates due."""
        if self.spec.dqn.overlap:
            return self._iterate_overlapped()
        previous_step = self.step
        records = self._act_and_store()
        self.step += self.envs.num_envs
        if self.step >= self.spec.dqn.learning_starts:
            for _ in range(self._gradient_steps_due(previous_step, self.step)):
                self.loss_sums.add(self.learner.update(self._sample(self.step), self.step))
            self._update_target(previous_step)
        return records

    def _iterate_overlapped(self) -> list[dict]:
        """The same step with the rounds of gradient steps on the learner's thread while the envs step.

        A round starts at the step it is due, from batches drawn then, and runs while the envs step until
        the next round or target update closes it. Until it closes, the envs act with the network as it
        was before it (a one-round policy lag). Only the schedule opens and closes rounds, never which
        side finishes first, so the run is the same on any machine.
        """
        settings = self.spec.dqn
        previous_step, step = self.step, self.step + self.envs.num_envs
        learning = step >= settings.learning_starts
        due = self._gradient_steps_due(previous_step, step) if learning else 0
        if due:
            if self.scored:  # a scored replay draws by the acting net's features, which closing the round updates
                self._close_round()
                batches = [self._sample(step) for _ in range(due)]
            else:  # the draw needs nothing of the running round, so it runs beside it: the same batches
                batches = [self._sample(step) for _ in range(due)]
                self._close_round()
            self.learner_rounds.start(batches, step)
        try:
            records = self._act_and_store()
        except BaseException:
            self.learner_rounds.close()  # a failed step leaves no round running
            raise
        self.step = step
        if learning and crossed(previous_step, step, settings.target_update_every):
            self._close_round()  # the target is the online net after every round started so far
            self.learner.update_target()
        return records

    def _wait_round(self) -> None:
        """Let the running round finish (a checkpoint, metrics line or fingerprint reads its result)."""
        losses = self.learner_rounds.collect()
        if losses is not None:
            self.round_losses = losses

    def _close_round(self) -> None:
        """Where the schedule ends a round: its losses count and the envs act with its result from now on."""
        self._wait_round()
        for losses in self.round_losses:
            self.loss_sums.add(losses)
        self.round_losses = []
        self.learner.acting.sync()

    def _act_and_store(self) -> list[dict]:
        actions = self._choose_actions()
        result = self.envs.step(actions)
        records = [record for index, action in enumerate(actions)
                   if (record := self._store(index, int(action), result, *self._scores(index)))]
        self.observations = result.observations
        return records

    def _choose_actions(self) -> np.ndarray:
        # Draw both random numbers every step so the stream's consumption never depends on the net.
        count = self.envs.num_envs
        explore = self.exploration.random(count) < self.epsilon(self.step)
        actions = self.exploration.integers(self.num_actions, size=count)
        if self.scored:
            # Every row needs its features, exploring or not, so one pass serves both; and whether the
            # net runs never depends on the action choice.
            self.step_features, self.step_values = self.learner.features_and_values(self.observations)
            actions = np.where(explore, actions, self.step_values.argmax(axis=1))
        elif not explore.all():
            greedy = self.learner.greedy_actions(self.observations)
            actions = np.where(explore, actions, greedy)
        return actions

    def _scores(self, index: int) -> tuple:
        """One env's row of the step's features and Q-values, which a scored replay stores (else none)."""
        return (self.step_features[index], self.step_values[index]) if self.scored else (None, None)

    def _gradient_steps_due(self, previous_step: int, step: int) -> int:
        """Gradient steps of the round that ends the step from previous_step to step (0 if none is due)."""
        settings = self.spec.dqn
        if not crossed(previous_step, step, settings.train_every):
            return 0
        # learning_starts gates DQN; a replay waits for more only where its min_size says so.
        minimums = [replay.min_size or share for replay, share in zip(self.replays.replays, self.replays.shares)]
        return settings.gradient_steps if self.replays.ready(minimums, settings.n_step) else 0

    def _sample(self, step: int) -> TransitionBatch:
        settings = self.spec.dqn
        return self.replays.sample(settings.batch_size, settings.n_step, settings.gamma, self.feature_source, step)

    def _update_target(self, previous_step: int) -> None:
        if crossed(previous_step, self.step, self.spec.dqn.target_update_every):
            self.learner.update_target()

    def fingerprint(self) -> str:
        self._wait_round()
        return super().fingerprint()

    def train_metrics(self) -> dict:
        """Averages since the previous call, for a `train` line of metrics.jsonl."""
        self._wait_round()  # its update count is then the schedule's, not the thread's progress
        metrics = {"epsilon": self.epsilon(self.step), "lr": self.learner.learning_rate(self.step),
                   "updates": self.learner.updates, "episodes": self.episodes, "mean_return": self.mean_return()}
        metrics.update(self.loss_sums.means())
        return metrics

    def state_dict(self, *, include_replay: bool = True) -> dict:
        self._wait_round()
        state = {
            "learner": self.learner.state_dict(),
            "metrics": {SAVED_NAMES[name]: total for name, total in self.loss_sums.totals().items()}
            | {"loss_count": self.loss_sums.count},
            **self._loop_state(include_replay),
        }
        if self.learner.acting is not None:
            # Mid-round the envs still act with the network from before it, and its losses count later.
            state["overlap"] = {"acting": self.learner.acting.module.state_dict(),
                                "round_losses": [{name: float(value) for name, value in losses.items()}
                                                 for losses in self.round_losses]}
        return state

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["learner"])
        metrics = state["metrics"]
        self.loss_sums.load({name: metrics[saved] for name, saved in SAVED_NAMES.items()}, metrics["loss_count"])
        restarts = self._load_loop_state(state)
        if self.learner.acting is not None and "overlap" in state:
            self.learner.acting.module.load_state_dict(state["overlap"]["acting"])
            self.round_losses = [{name: torch.tensor(value, dtype=torch.float32, device=self.device)
                                  for name, value in losses.items()} for losses in state["overlap"]["round_losses"]]
        self._start_fresh_episodes(restarts, replay_loaded="replay" in state)

    def close(self) -> None:
        self.learner_rounds.close()
        self.envs.close()


def greedy_network(spec: JobSpec, trainer_state: dict) -> nn.Module:
    """The greedy CPU policy of a checkpoint as a module: the online Q-network's argmax (what export writes)."""
    observation_shape, _, num_actions, _ = probe_env(spec.env)
    network = q_network_of(spec.dqn, observation_shape, num_actions)
    return greedy_actions_module(network, trainer_state["learner"]["online"])


def policy_from_checkpoint(spec: JobSpec, trainer_state: dict) -> Policy:
    """The greedy CPU policy of a checkpoint (what enjoy plays): greedy_network on numpy arrays."""
    return numpy_policy(greedy_network(spec, trainer_state))
