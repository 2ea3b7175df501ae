"""V-trace actor throughput on an Atari or MinAtar game: raw actor loops vs the actor/learner pipeline, and learner updates/s.

    python bench/vtrace_throughput.py [--game ALE/Pong-v5] [--actors 2] [--envs-per-actor 4] [--also-groups 2]

The result (bench/results_format.py) goes to --out, by default results/vtrace-throughput-GAME.json.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import torch

import results_format  # bench/ beside this script
from rlsup import spec as specs
from rlsup.algos import actor_processes
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


@dataclasses.dataclass(frozen=True)
class PipelineRates:
    """What the actor/learner pipeline did over a measurement, per second and per update."""

    steps_per_second: float     # agent steps the actors delivered into the replay
    updates_per_second: float
    waited: float               # the learner's seconds waiting for actors, per update
    assembly: float             # its seconds drawing each batch from the replay: the most a prefetch could hide
    learner_cpu: float          # its CPU seconds in the update itself, per update


def pipeline_rates(spec: specs.JobSpec, seconds: float, *, train: bool) -> PipelineRates:
    """The pipeline's rates over `seconds`, after the actors' warm-up rounds.

    train=False swaps the gradient step for nothing (batches are still sampled and weights still
    published), which isolates what the actor/learner machinery itself costs the actors.
    """
    trainer = VtraceTrainer(spec, torch.device(spec.job.device))
    update = trainer.learner.update if train else (lambda batch, step: dict.fromkeys(LOSS_NAMES, torch.zeros(())))
    seconds_in = {"sample": 0.0, "update": 0.0}
    trainer.replays.sample = _timed(trainer.replays.sample, seconds_in, "sample", time.perf_counter)
    # CPU time of the process (all its torch threads): what the update takes from the cores, not its waits.
    trainer.learner.update = _timed(update, seconds_in, "update", time.process_time)
    try:
        warm_up_unrolls = spec.vtrace.actors * spec.vtrace.envs_per_actor * WARM_UP_ROUNDS
        while trainer.unrolls < warm_up_unrolls or trainer.step == 0:
            trainer.iterate()
        began, unrolls, steps, waited = time.perf_counter(), trainer.unrolls, trainer.step, trainer.waited_seconds
        before = dict(seconds_in)
        while time.perf_counter() - began < seconds:
            trainer.iterate()
        elapsed = time.perf_counter() - began
        updates = (trainer.step - steps) / (spec.vtrace.unroll_length * spec.vtrace.batch_size)
        per_update = max(updates, 1)  # a measurement without an update still divides
        return PipelineRates((trainer.unrolls - unrolls) * spec.vtrace.unroll_length / elapsed, updates / elapsed,
                             (trainer.waited_seconds - waited) / per_update,
                             (seconds_in["sample"] - before["sample"]) / per_update,
                             (seconds_in["update"] - before["update"]) / per_update)
    finally:
        trainer.close()


def pipeline_with_groups(spec: specs.JobSpec, seconds: float, count: int) -> PipelineRates:
    """pipeline_rates with the learner, each actor given count unroll groups instead of rlsup's rule."""
    rule = actor_processes.groups_per_actor
    actor_processes.groups_per_actor = lambda settings: count
    try:
        return pipeline_rates(spec, seconds, train=True)
    finally:
        actor_processes.groups_per_actor = rule


def _timed(function, totals: dict, key: str, clock):
    """function, adding the seconds of each call by clock to totals[key]."""
    def timed(*arguments, **keywords):
        began = clock()
        try:
            return function(*arguments, **keywords)
        finally:
            totals[key] += clock() - began
    return timed


def cpu_bound(spec: specs.JobSpec, raw: float, learner_cpu: float, cores: int) -> float:
    """The most agent steps/s actors can deliver when the learner's update takes learner_cpu CPU seconds of
    the same cores: each update's steps need their share of actor-core time, and the update its own.

    Actors alone make raw steps/s on min(actors, cores) cores; per update they must make S = unroll x batch
    steps, so an update's wall time T satisfies cores x T >= learner_cpu + S / per-core rate, and the actors
    can use no more than their own count of cores."""
    settings = spec.vtrace
    steps = settings.unroll_length * settings.batch_size
    per_core = raw / min(settings.actors, cores)
    seconds = max((learner_cpu + steps / per_core) / cores, steps / (per_core * settings.actors), learner_cpu)
    return steps / seconds


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
    parser.add_argument("--also-groups", type=int, action="append", default=[], metavar="N",
                        help="also run the whole pipeline with N unroll groups per actor instead of rlsup's rule "
                             "(2 was the rule before the learner could take a whole batch's rounds)")
    results_format.add_out_argument(parser, "results/vtrace-throughput-GAME.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/vtrace_throughput.py")
    if not arguments.game.startswith(("ALE/", "MinAtar/")):
        parser.error(f"--game {arguments.game}: this bench runs Atari (ALE/...) and MinAtar (MinAtar/...) games")
    torch.set_num_threads(arguments.threads)
    spec = bench_spec(arguments)
    raw = raw_rate(spec, arguments.seconds)
    machinery = pipeline_rates(spec, arguments.seconds, train=False)
    full = pipeline_rates(spec, arguments.seconds, train=True)
    others = {count: pipeline_with_groups(spec, arguments.seconds, count) for count in arguments.also_groups}
    cores = len(os.sched_getaffinity(0))
    print(f"{arguments.game}, {arguments.actors} actors x {arguments.envs_per_actor} envs, unroll "
          f"{arguments.unroll}, batch {arguments.batch}, learner on {arguments.device} with "
          f"{arguments.threads} thread(s), {cores} cores, {arguments.seconds:g} s per measurement")
    print(f"{'':38}{'agent steps/s':>14}{'ratio':>8}{'updates/s':>11}")
    print(f"{'raw actor loops (no learner)':38}{raw:>14.0f}{1.0:>8.2f}{'':>11}")
    groups = actor_processes.groups_per_actor(spec.vtrace)
    rows = [("pipeline, no gradient step", machinery), (f"V-trace (pipeline + learner), {groups} groups", full)]
    rows += [(f"V-trace, {count} groups per actor", rates) for count, rates in others.items()]
    for label, rates in rows:
        print(f"{label:38}{rates.steps_per_second:>14.0f}{rates.steps_per_second / raw:>8.2f}"
              f"{rates.updates_per_second:>11.2f}")
    for label, rates in rows[1:]:
        if rates.updates_per_second == 0:
            print(f"{label}: no update in {arguments.seconds:g} s")
            continue
        print(f"{label}: the learner waited for the actors {1000 * rates.waited:.1f} ms per update, of "
              f"{1000 / rates.updates_per_second:.1f} ms ({100 * rates.waited * rates.updates_per_second:.0f}% "
              f"idle); drawing each batch from the replay took {1000 * rates.assembly:.1f} ms")
    bound = cpu_bound(spec, raw, full.learner_cpu, cores) if arguments.device == "cpu" else None
    if bound:
        print(f"the update took {1000 * full.learner_cpu:.0f} ms of CPU, which leaves the actors at most {bound:.0f} "
              f"agent steps/s on {cores} cores ({bound / raw:.2f}x raw): the pipeline made "
              f"{full.steps_per_second / bound:.0%} of that bound")
    print("budget: pipeline / raw >= 0.80 (an agent step is 4 emulator frames); with a CPU learner the "
          "V-trace rows also measure the learner taking cores from the actors")
    write_result(arguments, run, raw, rows, (bound, full.learner_cpu), cores)
    return 0


def write_result(arguments: argparse.Namespace, run: dict, raw: float, rows: list, bound: tuple, cores: int) -> None:
    """The printed rows, with the learner's wait per update, and the bound a CPU learner leaves the actors."""
    column = results_format.column
    columns = [column("agent steps/s", "steps/s", 0), column("of raw", "x", 2), column("updates/s", "updates/s", 2),
               column("the learner waited for the actors, an update", "ms", 1),
               column("the learner idle", "%", 0)]
    figures = {"raw actor loops (no learner)": [raw, 1.0, None, None, None]}
    figures |= {label: [rates.steps_per_second, rates.steps_per_second / raw, rates.updates_per_second,
                        *([1000 * rates.waited, 100 * rates.waited * rates.updates_per_second]
                          if rates.updates_per_second and label != rows[0][0] else [None, None])]
                for label, rates in rows}
    said = (f"{arguments.actors} actors x {arguments.envs_per_actor} envs, unroll {arguments.unroll}, batch "
            f"{arguments.batch}, learner on {arguments.device} with {arguments.threads} thread(s), {cores} cores, "
            f"{arguments.seconds:g} s a measurement.")
    tables = [results_format.measurement(arguments.game, "loop", columns, figures, said)]
    most, learner_cpu = bound
    if most:
        tables.append(results_format.measurement(
            "The most a CPU learner leaves the actors", "what", [column("figure", None, 2)],
            {"the update's CPU (s)": [learner_cpu], "agent steps/s the actors can deliver at most": [most],
             "that, of raw": [most / raw]}))
    label, rates = rows[1]
    finding = f"{label}: the pipeline delivered {rates.steps_per_second / raw:.2f}x the raw actors' agent steps/s."
    results_format.write_figures(arguments, run, f"vtrace-throughput-{results_format.game_word(arguments.game)}",
                                 f"V-trace on {arguments.game}: raw actor loops against the actor/learner pipeline",
                                 tables, finding)


if __name__ == "__main__":
    sys.exit(main())
