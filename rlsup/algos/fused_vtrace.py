"""V-trace on a fused game in one process on one device: the batched forward acts for every game, the game steps as
tensors, and each update trains on the unrolls just made, with no actor, no shared memory and no host round trip."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from rlsup.algos.contract import LearnerTrainer
from rlsup.algos.envs.fused import CheckedGame, make_fused_game
from rlsup.algos.episodes import EpisodeReturns
from rlsup.algos.impala import LOSS_NAMES, VtraceLearner, VtraceTrainer
from rlsup.algos.loss_sums import LossSums
from rlsup.algos.nets import policy_value_network_of
from rlsup.replay.unrolls import UnrollBatch
from rlsup.run import metrics as records
from rlsup.spec import JobSpec

# Children of the job's seed sequence: the games' seed, then the action sampler's.
GAME_STREAM, SAMPLING_STREAM = 0, 1


@dataclass
class UnrollBuffers:
    """One update's unrolls of every game, time-major, allocated once on the learner's device."""

    observations: torch.Tensor  # [T+1, B, *obs]
    actions: torch.Tensor       # [T, B] int64
    rewards: torch.Tensor       # [T, B] float32 learning rewards
    dones: torch.Tensor         # [T, B] bool: the bootstrap cut
    logits: torch.Tensor        # [T, B, A] the behaviour policy's
    ended_returns: torch.Tensor  # [T, B] float64: the score of an episode that ended at t (where dones)
    ended_lengths: torch.Tensor  # [T, B] int64

    @classmethod
    def allocate(cls, length: int, games: CheckedGame, device: torch.device) -> UnrollBuffers:
        count = games.num_envs

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(zeros(length + 1, count, *games.observation_shape, dtype=games.observation_dtype),
                   zeros(length, count, dtype=torch.int64), zeros(length, count),
                   zeros(length, count, dtype=torch.bool), zeros(length, count, games.actions.count),
                   zeros(length, count, dtype=torch.float64), zeros(length, count, dtype=torch.int64))


class FusedVtraceTrainer(LearnerTrainer):
    """[vtrace] batch_size fused games, unroll_length steps of each per update, all on the job's device.

    `step` counts env steps as VtraceTrainer's does (unroll_length × batch_size per update). A checkpoint holds the
    games' state, the observations acted on next, the sampler's generator and the episodes in progress, so a pause
    at any update resumes bit for bit on the same device.
    """

    holds_replay = False  # each batch of unrolls is made and trained on within one iterate()

    def __init__(self, spec: JobSpec, device: torch.device):
        self.spec = spec
        settings = spec.vtrace
        game_seed, sampling_seed = (int(child.generate_state(1)[0])
                                    for child in np.random.SeedSequence(spec.job.seed).spawn(2))
        self.games = make_fused_game(spec.env, settings.batch_size, game_seed, device)
        torch.manual_seed(spec.job.seed)
        network = policy_value_network_of(settings, self.games.observation_shape, self.games.actions.count)
        self.learner = VtraceLearner(settings, network, device)
        self.sampling = torch.Generator(device=device)
        self.sampling.manual_seed(sampling_seed)
        self.buffers = UnrollBuffers.allocate(settings.unroll_length, self.games, device)
        self.observations = self.games.reset()
        self.episode_returns = torch.zeros(settings.batch_size, dtype=torch.float64, device=device)
        self.episode_lengths = torch.zeros(settings.batch_size, dtype=torch.int64, device=device)
        self.step = 0
        self.unrolls = 0
        self.returns = EpisodeReturns()
        self.loss_sums = LossSums(LOSS_NAMES)

    # -- training ----------------------------------------------------------------------------

    def iterate(self) -> list[dict]:
        """One update: unroll every game, train on the unrolls, report the episodes that ended."""
        step = self.step  # episodes are reported at the step the update began, as actors' deliveries are
        self._unroll()
        buffers = self.buffers
        self.games.check_rewards(buffers.ended_returns, self.episode_returns)
        batch = UnrollBatch(buffers.observations, buffers.actions, buffers.rewards, buffers.dones, buffers.logits,
                            features=None, indices=None)
        self.loss_sums.add(self.learner.update(batch, self.step))
        self.step += buffers.actions.numel()
        self.unrolls += self.games.num_envs
        return self._ended_episodes(step)

    @torch.no_grad()
    def _unroll(self) -> None:
        buffers, network = self.buffers, self.learner.network
        clip = self.spec.env.clip_rewards
        for time_step in range(buffers.actions.shape[0]):
            output = network(self.observations)
            actions = torch.multinomial(torch.softmax(output.logits, dim=-1), 1, generator=self.sampling).squeeze(1)
            buffers.observations[time_step] = self.observations
            buffers.logits[time_step] = output.logits
            buffers.actions[time_step] = actions
            result = self.games.step(actions)
            ended = result.terminations | result.truncations
            rewards = torch.sign(result.rewards) if clip else result.rewards
            if getattr(self.games.game, "truncates", True):
                # A time limit is not the end of the task: fold the bootstrap from the true last state into the
                # reward (Pardo et al. 2018), as the actors do. A game that never truncates skips the forward.
                cut = result.truncations & ~result.terminations
                rewards = rewards + cut * self.spec.vtrace.gamma * network(result.final_observations).values
            buffers.rewards[time_step] = rewards
            buffers.dones[time_step] = ended
            self.episode_returns += result.rewards
            self.episode_lengths += 1
            buffers.ended_returns[time_step] = torch.where(ended, self.episode_returns, 0.0)
            buffers.ended_lengths[time_step] = torch.where(ended, self.episode_lengths, 0)
            self.episode_returns.masked_fill_(ended, 0.0)
            self.episode_lengths.masked_fill_(ended, 0)
            self.observations = result.observations
        buffers.observations[-1] = self.observations

    def _ended_episodes(self, step: int) -> list[dict]:
        """The episodes that ended in this update, in step order then game order: one wait for the device."""
        buffers = self.buffers
        # Boolean indexing is row-major over [T, B]: step order, then game order. One copy each to the host.
        scores = buffers.ended_returns[buffers.dones].cpu().tolist()
        lengths = buffers.ended_lengths[buffers.dones].cpu().tolist()
        episodes = []
        for score, length in zip(scores, lengths):
            self.returns.add(score)
            episodes.append({records.KIND: records.EPISODE, records.EPISODE_RETURN: score,
                             records.EPISODE_LENGTH: length, "step": step})
        return episodes

    # -- the rest of the Trainer contract (algos/contract.py) --------------------------------

    def train_metrics(self) -> dict:
        metrics = {"lr": self.learner.learning_rate(self.step), "updates": self.learner.updates,
                   "episodes": self.episodes, "unrolls": self.unrolls, "mean_return": self.mean_return()}
        metrics.update(self.loss_sums.means())
        return metrics

    def gpu_memory_bytes(self) -> int | None:
        """torch's peak on the GPU beside what the game's own allocator holds there (JAX's: torch never sees it),
        which GPU packing counts even where NVML cannot see this process."""
        torch_bytes = super().gpu_memory_bytes()
        game_bytes = getattr(self.games.game, "device_memory_bytes", None)
        extra = game_bytes() if callable(game_bytes) else None
        return None if torch_bytes is None else torch_bytes + (extra or 0)

    def state_dict(self, *, include_replay: bool = True) -> dict:
        """Everything the next update reads: nothing is in flight between two iterate() calls."""
        return {
            "learner": self.learner.state_dict(),
            "counters": {"step": self.step, "unrolls": self.unrolls},
            "episodes": self.returns.state_dict(),
            "metrics": {"loss_sums": self.loss_sums.totals(), "loss_count": self.loss_sums.count},
            "games": self.games.state_dict(),
            "acting": {"observations": self.observations.cpu(), "sampling": self.sampling.get_state(),
                       "episode_returns": self.episode_returns.cpu(), "episode_lengths": self.episode_lengths.cpu()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state["learner"])
        counters, metrics, acting = state["counters"], state["metrics"], state["acting"]
        self.step, self.unrolls = int(counters["step"]), int(counters["unrolls"])
        self.returns.load_state_dict(state["episodes"])
        self.loss_sums.load(metrics["loss_sums"], metrics["loss_count"])
        self.games.load_state_dict(state["games"])
        self.observations = self._saved(acting["observations"], self.observations)
        self.episode_returns = self._saved(acting["episode_returns"], self.episode_returns)
        self.episode_lengths = self._saved(acting["episode_lengths"], self.episode_lengths)
        self.sampling.set_state(torch.as_tensor(acting["sampling"], dtype=torch.uint8))

    @staticmethod
    def _saved(saved, current: torch.Tensor) -> torch.Tensor:
        """A saved tensor checked against the one it replaces (a stranger's checkpoint may hold anything)."""
        tensor = torch.as_tensor(saved)
        if tensor.shape != current.shape or tensor.dtype != current.dtype:
            raise ValueError(f"the checkpoint holds a tensor of shape {tuple(tensor.shape)} and {tensor.dtype} where "
                             f"this run keeps {tuple(current.shape)} and {current.dtype}")
        return tensor.to(current.device)

    def close(self) -> None:
        self.games.close()


def build_trainer(spec: JobSpec, device: torch.device) -> LearnerTrainer:
    """[job] algo = "vtrace"'s trainer: this one-process loop on a fused source, else impala.py's actors and learner."""
    if spec.env.source == "fused":
        return FusedVtraceTrainer(spec, device)
    return VtraceTrainer(spec, device)
