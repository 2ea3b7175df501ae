"""A learner's per-update losses summed where they are computed, and read once per metrics line."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch

from rlsup.algos.device import UsageError


class Diverged(UsageError):
    """A loss became NaN or infinite, and the weights with it: the job stops (exit 2, never retried, as a
    resume would diverge the same way) before any checkpoint is written from them."""


class LossSums:
    """Running sums of named scalar tensors since the last read, with their count.

    Reading a GPU tensor's value (`.item()`) waits for the GPU to finish everything queued, so a learner that
    read its losses after each update would stall the device once per gradient step, and V-trace reads eight.
    The sums stay on the device in float64 and are read when a metrics line is written or a checkpoint is
    saved. They are the same values as summing the floats in Python: float64 additions in the same order.
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        self.reset()

    def reset(self) -> None:
        self.sums = torch.zeros(len(self.names), dtype=torch.float64)
        self.count = 0

    def add(self, values: Mapping[str, torch.Tensor]) -> None:
        """One update's scalars (detached 0-d tensors, on the learner's device)."""
        stacked = torch.stack([values[name].detach() for name in self.names]).double()
        if self.sums.device != stacked.device:
            self.sums = self.sums.to(stacked.device)
        self.sums += stacked
        self.count += 1

    def totals(self) -> dict[str, float]:
        """The sums; raises Diverged when one is NaN or infinite (read before every metrics line and checkpoint,
        so that no checkpoint holds diverged weights and the good ones are not rotated away by them)."""
        totals = dict(zip(self.names, self.sums.tolist()))
        broken = [name for name, total in totals.items() if not math.isfinite(total)]
        if broken:
            raise Diverged(f"training diverged: the {', '.join(broken)} of the last {self.count} updates "
                           f"reached NaN or infinity, and the weights with it; no checkpoint was written from them. "
                           f"Fork the newest checkpoint with a lower lr or a max_grad_norm (rlsup fork RUN NEW.toml)")
        return totals

    def means(self) -> dict[str, float]:
        """The mean of each scalar since the last read (none before the first update), and a fresh start."""
        means = {name: total / self.count for name, total in self.totals().items()} if self.count else {}
        self.reset()
        return means

    def load(self, totals: Mapping[str, float], count: int) -> None:
        """Sums and count as a checkpoint recorded them (totals() and count).

        Sums from a learner that measured fewer scalars (a checkpoint older than one of them) are dropped, so
        that the next line averages every scalar over the same updates: those since the resume.
        """
        if not all(name in totals for name in self.names):
            self.reset()
            return
        self.sums = torch.tensor([float(totals[name]) for name in self.names], dtype=torch.float64)
        self.count = int(count)
