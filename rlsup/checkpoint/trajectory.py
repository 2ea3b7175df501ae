"""The trajectory bookkeeping a checkpoint carries in its manifest's `extra`: one record, its keys defined here only."""
from __future__ import annotations

from dataclasses import dataclass, field

from rlsup.formatting import number
from rlsup.hardware import GpuMemory


@dataclass
class Trajectory:
    """What a run has done on its way to a checkpoint besides the trainer's state, as the manifest's extra holds it.

    The worker writes it (worker/training.py), its resume reads it back (worker/resume.py), and listings read
    a best checkpoint's evaluation and the env restarts (manifest.py). A manifest may come from a stranger, so
    reading checks each value's type and drops what does not fit, as if it were absent.
    """

    algo: str | None = None  # the run's [job] algo
    # The best evaluation mean of the trajectory so far; beating it writes a best checkpoint. Written always
    # (null before the first evaluation); best_evaluation_recorded is False only for a checkpoint written before
    # extra held it, whose resume falls back to the metrics.
    best_evaluation: float | None = None
    training_wall_s: float = 0.0  # seconds of training over the trajectory ([job] max_wall_s counts them)
    # Envs that started fresh episodes on a resume of this trajectory (their saved episode did not replay
    # exactly): every checkpoint after it says so. Written only when there are some.
    env_restarts: list[str] = field(default_factory=list)
    # Where the worker's TensorBoard event file stood (worker/tensorboard.py), opaque here; only when it has one.
    tensorboard_events: dict | None = None
    evaluation_mean: float | None = None  # the evaluation that made a best checkpoint best; only in those
    best_evaluation_recorded: bool = field(default=True, compare=False)  # read only, never written
    # What the worker held on its GPU when it wrote the checkpoint (run/status.py's GpuMemory); only on a GPU.
    gpu_memory: GpuMemory | None = None

    def to_extra(self) -> dict:
        """The manifest's extra: the same keys, and the same ones left out, as every checkpoint so far."""
        extra = {"algo": self.algo, "best_evaluation": self.best_evaluation, "training_wall_s": self.training_wall_s}
        optional = {"evaluation_mean": self.evaluation_mean, "env_restarts": self.env_restarts,
                    "tensorboard_events": self.tensorboard_events,
                    "gpu_memory": self.gpu_memory.to_json() if self.gpu_memory else None}
        return extra | {key: value for key, value in optional.items() if value is not None and value != []
                        and value != {}}

    @classmethod
    def from_extra(cls, extra: object) -> Trajectory:
        extra = extra if isinstance(extra, dict) else {}
        restarts, events, algo = extra.get("env_restarts"), extra.get("tensorboard_events"), extra.get("algo")
        return cls(algo=algo if isinstance(algo, str) else None,
                   best_evaluation=number(extra.get("best_evaluation")),
                   training_wall_s=number(extra.get("training_wall_s")) or 0.0,
                   env_restarts=[str(sentence) for sentence in restarts] if isinstance(restarts, list) else [],
                   tensorboard_events=events if isinstance(events, dict) else None,
                   evaluation_mean=number(extra.get("evaluation_mean")),
                   gpu_memory=GpuMemory.from_json(extra.get("gpu_memory")),
                   best_evaluation_recorded="best_evaluation" in extra)

    @classmethod
    def of_manifest(cls, manifest: dict) -> Trajectory:
        return cls.from_extra(manifest.get("extra"))

