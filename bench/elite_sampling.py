"""Elite sampling cost per batch against uniform, for an Atari DQN replay and a V-trace unroll replay.

    python bench/elite_sampling.py [--rows 20000] [--unrolls 1000] [--repeats 30]

The result (bench/results_format.py) goes to --out, by default results/elite-sampling.json.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import results_format  # bench/ beside this script
from rlsup.algos.nets import build_q_network
from rlsup.replay.samplers import SAMPLERS
from rlsup.replay.storage import TransitionStorage
from rlsup.replay.unrolls import UnrollStorage
from rlsup.spec import ReplaySection


class DriftedFeatures:
    """The sampler's own cost: current vectors are the stored ones slightly moved, no network runs."""

    def current_features(self, storage, indices):
        return storage.features[indices] + 0.01

    def current_logits(self, storage, indices):
        return storage.logits[indices] * 1.01


class NatureFeatures:
    """What DQN pays: the Nature CNN's penultimate features of every candidate's observation."""

    def __init__(self, num_actions: int) -> None:
        self.network = build_q_network((4, 84, 84), num_actions, [])

    @torch.no_grad()
    def current_features(self, storage, indices):
        return self.network.features(torch.as_tensor(storage.observations_at(indices))).numpy()

    def current_logits(self, storage, indices):
        raise NotImplementedError


def atari_transitions(rows: int, seed: int = 0) -> TransitionStorage:
    storage = TransitionStorage(rows, 1, (84, 84), np.uint8, 4, feature_size=512)
    generator = np.random.default_rng(seed)
    frames = generator.integers(0, 256, (64, 84, 84), dtype=np.uint8)
    features = np.maximum(generator.normal(size=(64, 512)), 0).astype(np.float32)
    first = True
    for row in range(rows):
        done = generator.random() < 0.002
        storage.add_step(0, frames[row % 64], 0, 0.0, done, first, features=features[row % 64])
        if done:
            storage.add_final(0, frames[(row + 1) % 64])
        first = done
    return storage


def cartpole_unrolls(capacity: int, length: int, seed: int = 0) -> UnrollStorage:
    storage = UnrollStorage(capacity, length, (4,), np.float32, 2, 512)
    generator = np.random.default_rng(seed)
    for _ in range(capacity):
        storage.add(generator.normal(size=(length + 1, 4)), generator.integers(2, size=length),
                    generator.normal(size=length), generator.random(length) < 0.05,
                    generator.normal(size=(length, 2)), generator.normal(size=(length + 1, 512)))
    return storage


def microseconds_per_batch(storage, sampler, share: int, source, repeats: int, gather: bool) -> float:
    """Median µs of one sample call (and gather of what it drew, when asked)."""
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        indices = sampler.sample(storage, share, 1, source)
        if gather:
            storage.gather(indices, 1, 0.99)
        timings.append(time.perf_counter() - start)
    return float(np.median(timings)) * 1e6


def compare(title: str, storage, share: int, sources: dict, repeats: int) -> dict:
    """Print each sampler's µs per batch against uniform's; return them as a measurement table."""
    print(f"\n{title}: {storage.stored_count()} items, {share} per batch, λ = 6 (the start of annealing)")
    rows = {}
    for gather in (False, True):
        what = "sample + gather" if gather else "sample only"
        uniform = microseconds_per_batch(storage, SAMPLERS["standard"](0), share, None, repeats, gather)
        print(f"  {what:16s} uniform {uniform:10.0f} µs")
        rows[f"{what}, uniform"] = [uniform, 1.0]
        for name, source in sources.items():
            for strategy in (1, 4):
                settings = ReplaySection(kind="elite", strategy=strategy, lambda_batch_multiplier=6.0,
                                         anneal_steps=10**9)
                cost = microseconds_per_batch(storage, SAMPLERS["elite"](0, settings), share, source, repeats,
                                              gather)
                print(f"  {what:16s} elite s{strategy} {name:22s} {cost:10.0f} µs  ratio {cost / uniform:6.1f}")
                rows[f"{what}, elite strategy {strategy} {name}"] = [cost, cost / uniform]
    column = results_format.column
    return results_format.measurement(title, "sampler", [column("per batch", "µs", 0), column("of uniform", "x", 1)],
                                      rows, f"{storage.stored_count():,} items, {share} per batch, λ = 6 (the start of "
                                      f"annealing), the median of {repeats}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="transitions in the Atari replay")
    parser.add_argument("--unrolls", type=int, default=1_000, help="unrolls in the V-trace replay")
    parser.add_argument("--repeats", type=int, default=30)
    results_format.add_out_argument(parser, "results/elite-sampling.json")
    arguments = parser.parse_args()
    run = results_format.started("bench/elite_sampling.py")
    torch.set_num_threads(1)
    tables = [compare("DQN Atari replay (4x84x84 stacks, 512 features)", atari_transitions(arguments.rows), 32,
                      {"(stored vectors only)": DriftedFeatures(), "(Nature CNN, 1 thread)": NatureFeatures(6)},
                      arguments.repeats),
              compare("V-trace unroll replay (T = 20, 21 x 512 features)", cartpole_unrolls(arguments.unrolls, 20), 16,
                      {"(stored vectors only)": DriftedFeatures()}, arguments.repeats)]
    results_format.write_figures(arguments, run, "elite-sampling", "Elite sampling cost per batch against uniform",
                                 tables)


if __name__ == "__main__":
    main()
