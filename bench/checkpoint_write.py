"""Checkpoint write and load speed against a plain sequential write, with peak memory, on a replay-sized state.

    python bench/checkpoint_write.py [--dir DIR] [--transitions 100000] [--rounds 5]

The result (bench/results_format.py) goes to --out, by default results/checkpoint-write.json.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

import results_format  # bench/ beside this script
from rlsup.checkpoint import store

DEFAULT_ALGORITHM = store.CHECKSUM_ALGORITHM

MIB = 1 << 20


def replay_arrays(transitions: int, seed: int = 0) -> dict:
    """Frame-deduplicated Atari replay: one 84x84 frame per transition plus actions, rewards and flags."""
    generator = np.random.default_rng(seed)
    return {"frames": generator.integers(0, 256, size=(transitions, 84, 84), dtype=np.uint8),
            "actions": generator.integers(0, 18, size=transitions, dtype=np.int64),
            "rewards": generator.standard_normal(transitions).astype(np.float32),
            "terminated": (generator.random(transitions) < 0.01).astype(np.uint8),
            "truncated": (generator.random(transitions) < 0.001).astype(np.uint8),
            "first": (generator.random(transitions) < 0.01).astype(np.uint8)}


def anonymous_memory() -> int:
    """Bytes of this process's anonymous resident memory (RssAnon): its own copies, not mapped file pages,
    which a memory-mapped load touches without copying them."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return psutil.Process().memory_info().rss


class PeakMemory:
    """Samples anonymous resident memory on a thread; peak minus the value at start is the extra used."""

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.stop = threading.Event()

    def __enter__(self):
        self.before = self.peak = anonymous_memory()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.stop.wait(self.interval):
            self.peak = max(self.peak, anonymous_memory())

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.peak = max(self.peak, anonymous_memory())

    @property
    def extra(self) -> int:
        return self.peak - self.before


def plain_write(path: Path, arrays: dict) -> float:
    """Seconds to write the arrays' bytes to one file and fsync it: the yardstick."""
    start = time.perf_counter()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for array in arrays.values():
            view = memoryview(array.reshape(-1).view(np.uint8))
            for offset in range(0, view.nbytes, 8 * MIB):
                os.write(descriptor, view[offset:offset + 8 * MIB])
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    seconds = time.perf_counter() - start
    path.unlink()
    return seconds


def checkpoint_write(run_dir: Path, arrays: dict, algorithm: str) -> tuple[float, int, int]:
    """Seconds, bytes written and peak extra memory of write_checkpoint with the given checksum."""
    store.CHECKSUM_ALGORITHM = algorithm  # the bench alone switches it, to show why crc32 was chosen
    try:
        with PeakMemory() as memory:
            start = time.perf_counter()
            entry = store.write_checkpoint(run_dir, {"replay": arrays, "counters": {"steps": 1}}, step=1,
                                           episodes=0, reason="interval", fingerprint="bench",
                                           spec_sha256="bench", metrics_bytes=0, keep=1)
            seconds = time.perf_counter() - start
    finally:
        store.CHECKSUM_ALGORITHM = DEFAULT_ALGORITHM
    return seconds, entry.bytes, memory.extra


def load_and_copy(checkpoint_dir: Path, destinations: dict, verify: bool) -> tuple[float, int]:
    """Seconds and peak extra memory of load_checkpoint plus copying into preallocated arrays."""
    with PeakMemory() as memory:
        start = time.perf_counter()
        _, state = store.load_checkpoint(checkpoint_dir, verify=verify)
        for name, destination in destinations.items():
            np.copyto(destination, state["replay"][name])
        seconds = time.perf_counter() - start
        del state
    return seconds, memory.extra


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=None, help="directory on the disk to measure (default: a temp dir in /tmp)")
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    results_format.add_out_argument(parser, "results/checkpoint-write.json")
    arguments = parser.parse_args()
    started = results_format.started("bench/checkpoint_write.py")
    root = Path(tempfile.mkdtemp(prefix="rlsup-bench-", dir=arguments.dir))
    try:
        total, rows = run(root, arguments.transitions, arguments.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    column = results_format.column
    table = results_format.measurement(
        f"A replay of {arguments.transitions:,} transitions ({total / MIB:.0f} MiB)", "what",
        [column("time", "s", 3), column("throughput", "MB/s", 0), column("plain / this", "x", 2),
         column("peak extra memory", "MiB", 1)], rows,
        f"Medians over {arguments.rounds} rounds, the writers' order rotating; peak extra memory is anonymous RSS "
        "sampled every 2 ms.")
    checkpoint = rows[f"write_checkpoint ({DEFAULT_ALGORITHM})"]
    results_format.write_figures(arguments, started, "checkpoint-write", "Checkpoint write and load against a plain "
                                 "sequential write", [table], f"A checkpoint wrote at {checkpoint[2]:.2f}x a plain "
                                 f"write's speed, with {checkpoint[3]:.1f} MiB of extra memory at its peak.")


def measure_writes(root: Path, arrays: dict, rounds: int) -> dict[str, list]:
    """Interleave plain, crc32 and sha256 writes, rotating their order, so that load from other
    processes on a shared machine falls on all of them alike."""
    kinds = ["plain", DEFAULT_ALGORITHM, "sha256" if DEFAULT_ALGORITHM != "sha256" else "crc32"]
    results: dict[str, list] = {kind: [] for kind in kinds}
    for number in range(rounds):
        for kind in kinds[number % 3:] + kinds[:number % 3]:
            if kind == "plain":
                results[kind].append((plain_write(root / "plain.bin", arrays), 0, 0))
            else:
                run_dir = root / f"run-{kind}"
                shutil.rmtree(run_dir, ignore_errors=True)
                results[kind].append(checkpoint_write(run_dir, arrays, kind))
    return results


def run(root: Path, transitions: int, rounds: int) -> tuple[int, dict[str, list]]:
    arrays = replay_arrays(transitions)
    total = sum(array.nbytes for array in arrays.values())
    print(f"replay: {transitions} transitions, {total / MIB:.0f} MiB in {len(arrays)} arrays; directory {root}")
    results = measure_writes(root, arrays, rounds)
    checkpoint_dir = root / f"run-{DEFAULT_ALGORITHM}" / "checkpoints" / "step-000000000001"
    # Touched first, so the copy's page faults are not counted as memory the load added.
    destinations = {name: np.ones_like(array) for name, array in arrays.items()}
    loads = [("load (verify) + copy", *load_and_copy(checkpoint_dir, destinations, verify=True)),
             ("load (no verify) + copy", *load_and_copy(checkpoint_dir, destinations, verify=False))]
    assert all(np.array_equal(destinations[name], arrays[name]) for name in arrays)
    return total, report(total, results, loads)


def report(total: int, results: dict, loads: list) -> dict[str, list]:
    """Print the table, and return it: seconds, MB per second, plain's seconds over these, peak extra MiB."""
    plain = statistics.median(seconds for seconds, _, _ in results["plain"])
    table = {"plain write + fsync": [plain, total / plain / 1e6, 1.0, None]}
    print(f"{'':38}{'seconds':>9}{'MB/s':>9}{'ratio':>8}   peak extra memory")
    print(f"{'plain write + fsync':38}{plain:9.3f}{total / plain / 1e6:9.0f}{1:8.2f}")
    for kind, rows in results.items():
        if kind == "plain":
            continue
        seconds = statistics.median(row[0] for row in rows)
        written, extra = rows[0][1], max(row[2] for row in rows)
        label = f"write_checkpoint ({kind})" + ("" if kind == DEFAULT_ALGORITHM else " [not used]")
        print(f"{label:38}{seconds:9.3f}{written / seconds / 1e6:9.0f}{plain / seconds:8.2f}"
              f"   {extra / MIB:.1f} MiB ({extra / total:.1%} of replay)")
        table[label] = [seconds, written / seconds / 1e6, plain / seconds, extra / MIB]
    for label, seconds, extra in loads:
        print(f"{label:38}{seconds:9.3f}{total / seconds / 1e6:9.0f}{'':8}   {extra / MIB:.1f} MiB")
        table[label] = [seconds, total / seconds / 1e6, None, extra / MIB]
    for kind, rows in results.items():
        print(f"  {kind} seconds per round: " + ", ".join(f"{row[0]:.3f}" for row in rows))
    print("ratio = plain seconds / checkpoint seconds, medians over rounds; budget: ratio >= 0.80, "
          "peak extra memory < 10% of the replay (anonymous RSS, sampled every 2 ms)")
    print("loads read from the page cache (the checkpoint was just written) into preallocated arrays")
    return table


if __name__ == "__main__":
    main()
