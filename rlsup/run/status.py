"""status.json (DESIGN.md section 6): what a worker last said of itself, one record that its writer and readers share."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from rlsup import atomic, paths
from rlsup.formatting import number, whole
from rlsup.hardware import GpuMemory
from rlsup.own_files import read_json


class Phase(str, enum.Enum):
    """Where the worker is: training (checkpointing is training too), or how it ended."""

    RUNNING = "running"
    CHECKPOINTING = "checkpointing"
    PAUSED = "paused"
    DONE = "done"
    FAILED = "failed"

    @property
    def training(self) -> bool:
        """A worker still at work, not one that has written its last status."""
        return self in (Phase.RUNNING, Phase.CHECKPOINTING)


@dataclass(frozen=True)
class WorkerStatus:
    """What a worker last wrote to status.json, rewritten about once a second; read back, each value is checked
    (the file may be a stranger's) and None where absent or of the wrong kind."""

    pid: int | None = None                    # the worker's process id
    phase: Phase | None = None                # where it is: training, or how it ended
    time: float | None = None                 # when it wrote this (Unix time)
    step: int | None = None                   # environment steps trained so far, over the run's whole trajectory
    total_steps: int | None = None            # the budget it trains to ([job] total_steps as it last read it)
    steps_per_second: float | None = None     # its recent training speed
    episodes: int | None = None               # training episodes finished
    mean_return: float | None = None          # the mean return of its recent training episodes
    last_checkpoint_step: int | None = None   # the step of its newest checkpoint
    device: str | None = None                 # where the learner runs: cpu, cuda:0
    notice: str | None = None  # what a user must hear about the resume; the daemon makes it an event
    switched_off: tuple[str, ...] = ()  # each requested feature the worker had to switch off, in a sentence
    gpu_memory: GpuMemory | None = None  # on a GPU: what it holds there (placement packs jobs by it)

    def to_json(self) -> dict:
        return {"pid": self.pid, "phase": self.phase.value if self.phase else None, "time": self.time,
                "step": self.step, "total_steps": self.total_steps, "steps_per_second": self.steps_per_second,
                "episodes": self.episodes, "mean_return": self.mean_return,
                "last_checkpoint_step": self.last_checkpoint_step, "device": self.device, "notice": self.notice,
                "switched_off": list(self.switched_off),
                "gpu_memory": self.gpu_memory.to_json() if self.gpu_memory else None}

    @classmethod
    def from_json(cls, raw: dict) -> WorkerStatus:
        phase, device = raw.get("phase"), raw.get("device")
        notice, switched_off = raw.get("notice"), raw.get("switched_off")
        return cls(pid=whole(raw.get("pid")), phase=Phase(phase) if isinstance(phase, str) and phase in PHASES else None,
                   time=number(raw.get("time")), step=whole(raw.get("step")), total_steps=whole(raw.get("total_steps")),
                   steps_per_second=number(raw.get("steps_per_second")), episodes=whole(raw.get("episodes")),
                   mean_return=number(raw.get("mean_return")),
                   last_checkpoint_step=whole(raw.get("last_checkpoint_step")),
                   device=device if isinstance(device, str) else None, notice=str(notice) if notice else None,
                   switched_off=tuple(str(sentence) for sentence in switched_off or () if sentence)
                   if isinstance(switched_off, list) else (),
                   gpu_memory=GpuMemory.from_json(raw.get("gpu_memory")))


PHASES = frozenset(phase.value for phase in Phase)


def read_worker_status(run_dir: str | Path) -> WorkerStatus | None:
    """The run's status.json, checked; None for a missing or half-written file."""
    raw = read_json(Path(run_dir) / paths.STATUS_FILE)
    return None if raw is None else WorkerStatus.from_json(raw)


def write_worker_status(run_dir: Path, status: WorkerStatus) -> None:
    atomic.write_json(Path(run_dir) / paths.STATUS_FILE, status.to_json())
