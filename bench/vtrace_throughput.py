"""V-trace actor throughput on an Atari or MinAtar game: raw actor loops vs the actor/learner pipeline, and learner updates/s."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import torch

from rlsup import spec as specs
from rlsup.algos.actors import Actor, actor_seed
from rlsup.algos.impala import LOSS_NAMES, VtraceTrainer
from rlsup.algos.shared_memory import UnrollGroups, UnrollLayout, WeightsBuffer

# Rounds each actor plays before the clock starts: env resets and first forward passes are not steady state.
WARM_UP_ROUNDS = 2


def bench_spec(arguments: argparse.Namespace) -> specs.JobSpec:
    spec = specs.JobSpec()
    spec = spec.replace("job", algo="vtrace", seed=1, device=arguments.device, threads=arguments.threads)
    if arguments.game.startswith("MinAtar/"):
        spec = spec.replace("env", id=arguments.game)
    else:
        spec = spec.replace("env", id=arguments.game, preset="atari", clip_rewards=True, episodic_life=True)
    spec = spec.replace("vtrace", actors=arguments.actors, envs_per_actor=arguments.envs_per_actor,
                        unroll_length=arguments.unroll, batch_size=arguments.batch, serial=False)
    queue = specs.ReplaySection(kind="queue", capacity=arguments.batch, ratio=1.0)
    return dataclasses.replace(spec, replay=(queue,))


# ---- raw: each actor's env + policy-forward loop, nothing else ----------------------------------------


def raw_actor_loop(spec: specs.JobSpec, index: int, seconds: float, start, results) -> None:
    """The Actor's own unroll loop into private memory: no queues, no shared slots, no learner."""
    torch.set_num_threads(1)
    actor = Actor(spec, index, actor_seed(spec.job.seed, index))
    settings = spec.vtrace
    groups = UnrollGroups(_layout(spec, actor), 1, shared=False)
    weights = WeightsBuffer(actor.network, shared=False)
    for _ in range(WARM_UP_ROUNDS):
        actor.unroll(weights, groups.group(0))
    start.wait()
    began, rounds = time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        actor.unroll(weights, groups.group(0))
        rounds += 1
    results.put(rounds * settings.unroll_length * settings.envs_per_actor / (time.perf_counter() - began))
    actor.close()


def _layout(spec: specs.JobSpec, actor: Actor) -> UnrollLayout:
    first = actor.envs
    return UnrollLayout(spec.vtrace.envs_per_actor, spec.vtrace.unroll_length, first.observation_shape,
                        first.observation_dtype, first.num_actions, spec.vtrace.feature_size)


def raw_rate(spec: specs.JobSpec, seconds: float) -> float:
    context = torch.multiprocessing.get_context("spawn")
    start, results = context.Barrier(spec.vtrace.actors + 1), context.Queue()
    processes = [context.Process(target=raw_actor_loop, args=(spec, index, seconds, start, results), daemon=True)
                 for index in range(spec.vtrace.actors)]
    for process in processes:
        process.start()
    start.wait()
    rates = [results.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    return sum(rates)


# ---- the pipeline: actor processes, shared slots, queues, replay, weight publishing ----------------------


def pipeline_rates(spec: specs.JobSpec, seconds: float, *, train: bool) -> tuple[float, float, float, float]:
    """(agent steps/s the actors delivered into the replay, learner updates/s, the learner's seconds spent
    waiting for actors per update, its seconds drawing each batch from the replay) over `seconds`.

    The last is the most that assembling the next batch during the current update could hide.

    train=False swaps the gradient step for nothing (batches are still sampled and weights still
    published), which isolates what the actor/learner machinery itself costs the actors.
    """
    trainer = VtraceTrainer(spec, torch.device(spec.job.device))
    if not train:
        trainer.learner.update = lambda batch, step: dict.fromkeys(LOSS_NAMES, torch.zeros(()))
    sampling = [0.0]
    sample = trainer.replays.sample

    def timed_sample(*arguments, **keywords):
        began = time.perf_counter()
        try:
            return sample(*arguments, **keywords)
        finally:
            sampling[0] += time.perf_counter() - began

    trainer.replays.sample = timed_sample
    try:
        warm_up_unrolls = spec.vtrace.actors * spec.vtrace.envs_per_actor * WARM_UP_ROUNDS
        while trainer.unrolls < warm_up_unrolls or trainer.step == 0:
            trainer.iterate()
        began, unrolls, steps, waited = time.perf_counter(), trainer.unrolls, trainer.step, trainer.waited_seconds
        sampled = sampling[0]
        while time.perf_counter() - began < seconds:
            trainer.iterate()
        elapsed = time.perf_counter() - began
        updates = (trainer.step - steps) / (spec.vtrace.unroll_length * spec.vtrace.batch_size)
        idle, assembly = (trainer.waited_seconds - waited) / max(updates, 1), (sampling[0] - sampled) / max(updates, 1)
        return (trainer.unrolls - unrolls) * spec.vtrace.unroll_length / elapsed, updates / elapsed, idle, assembly
    finally:
        trainer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="ALE/Pong-v5")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--envs-per-actor", type=int, default=4)
    parser.add_argument("--unroll", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per measurement")
    parser.add_argument("--threads", type=int, default=1, help="learner torch threads")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    arguments = parser.parse_args()
    torch.set_num_threads(arguments.threads)
    spec = bench_spec(arguments)
    raw = raw_rate(spec, arguments.seconds)
    machinery, idle_updates, _, _ = pipeline_rates(spec, arguments.seconds, train=False)
    full, updates, idle, assembly = pipeline_rates(spec, arguments.seconds, train=True)
    print(f"{arguments.game}, {arguments.actors} actors x {arguments.envs_per_actor} envs, unroll "
          f"{arguments.unroll}, batch {arguments.batch}, learner on {arguments.device} with "
          f"{arguments.threads} thread(s), {arguments.seconds:g} s per measurement")
    print(f"{'':38}{'agent steps/s':>14}{'ratio':>8}{'updates/s':>11}")
    print(f"{'raw actor loops (no learner)':38}{raw:>14.0f}{1.0:>8.2f}{'':>11}")
    print(f"{'pipeline, no gradient step':38}{machinery:>14.0f}{machinery / raw:>8.2f}{idle_updates:>11.2f}")
    print(f"{'V-trace (pipeline + learner)':38}{full:>14.0f}{full / raw:>8.2f}{updates:>11.2f}")
    print(f"the learner waited for the actors {1000 * idle:.1f} ms per update, of {1000 / updates:.1f} ms "
          f"({100 * idle * updates:.0f}% idle); drawing each batch from the replay took {1000 * assembly:.1f} ms")
    print("budget: pipeline / raw >= 0.80 (an agent step is 4 emulator frames); with a CPU learner the "
          "last row also measures the learner taking cores from the actors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
