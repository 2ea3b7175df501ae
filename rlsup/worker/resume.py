"""A worker's start-up: its new trainer continues from its newest verified checkpoint, a fork's parent, or step 0."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlsup import formatting, paths
from rlsup.run import lineage
from rlsup.run import metrics
from rlsup.run import files as runfiles
from rlsup.algos.contract import Trainer
from rlsup.checkpoint.choose import Choice
from rlsup.checkpoint.manifest import CheckpointProblem
from rlsup.checkpoint.trajectory import Trajectory

log = logging.getLogger("rlsup.worker")
# The checkpoint store (torch) is imported by the functions that load: this module's import stays light.
# Where an algorithm's trainer state keeps optimizer state: --fresh-optimizer replaces every subtree so named.
OPTIMIZER_KEY = "optimizer"


@dataclass
class StartingPoint:
    """What a run carries on from besides the trainer's own state, all of it as of one checkpoint."""

    notice: str | None = None  # what a user must hear about the resume (status.json carries it)
    checkpoint: str | None = None  # the checkpoint resumed from, for exit.json (a fork's inherited one is not)
    checkpoint_step: int | None = None
    # The bookkeeping the run's next checkpoints write on from (a fork's carries no wall time or event file).
    trajectory: Trajectory = field(default_factory=Trajectory)


def restore(run_dir: Path, choice: Choice, trainer: Trainer) -> StartingPoint:
    """Load the chosen checkpoint (or a fork's parent's) into trainer, cutting metrics back to its length."""
    from rlsup.checkpoint.rng import restore_global_rng_state
    from rlsup.checkpoint.store import load_checkpoint

    entry, notice = choice.entry, choice.skipped_message()
    if entry is None and (Path(run_dir) / lineage.PARENT_FILE).exists():
        return initialise_fork(run_dir, trainer)
    if entry is None:
        runfiles.truncate_metrics(run_dir, 0)
        return StartingPoint()
    if notice:
        log.warning(notice)
    # newest_usable has just checksummed every file: a second pass would read a large replay twice.
    manifest, state = load_checkpoint(entry.path, verify=False)
    load_into_trainer(trainer, state["trainer"], entry.path.name)
    start = StartingPoint(notice=notice, checkpoint=str(entry.path), checkpoint_step=entry.step,
                          trajectory=Trajectory.of_manifest(manifest))
    note_env_restarts(start, trainer, entry.path.name)
    restore_global_rng_state(state["rng"])
    runfiles.truncate_metrics(run_dir, int(manifest["metrics_bytes"]))
    start.trajectory.best_evaluation = best_evaluation_at(run_dir, manifest)
    if "replay" not in state["trainer"] and getattr(trainer, "holds_replay", True):
        log.warning("checkpoint %s holds no replay ([checkpoint] replay = false): "
                    "the resumed run refills it and will not match an uninterrupted one", entry.path.name)
    log.info("resumed from %s (step %d, fingerprint %s)", entry.path.name, entry.step, entry.fingerprint[:12])
    return start


def load_into_trainer(trainer: Trainer, state: dict, checkpoint: str) -> None:
    """The checkpoint into the trainer this job file builds, or one sentence on why it does not fit.

    A checkpoint that verified yet does not load was written for other networks: most often the env's
    spaces changed under the run (its package upgraded between pause and resume). Retrying cannot help,
    so it is the user's to decide (exit 2, which the daemon never retries); torch's own words end the sentence."""
    try:
        trainer.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError, TypeError, IndexError) as error:
        detail = formatting.one_line(str(error))
        raise CheckpointProblem(f"{checkpoint} does not fit the trainer this job builds ({detail[:300]}): did the "
                                f"env's observation or action space change since it was written (its package "
                                f"upgraded, say)? Nothing was changed; resume with the env as it was, or start a "
                                f"new run") from None


def note_env_restarts(start: StartingPoint, trainer: Trainer, checkpoint: str) -> None:
    """Log each env that resumed on a fresh episode, tell the TUI, and carry the note into later checkpoints."""
    restarts = list(getattr(trainer, "env_restarts", ()))  # a plugin's trainer may predate the attribute
    for sentence in restarts:
        log.warning("on resume from %s: %s", checkpoint, sentence)
        start.trajectory.env_restarts.append(f"resumed from {checkpoint}: {sentence}")
    if restarts:
        others = len(restarts) - 1
        more = f" (and {others} more env{'s' if others > 1 else ''}, see worker.log)" if others else ""
        start.notice = " ".join(filter(None, [start.notice, f"{restarts[0]}{more}."]))


def best_evaluation_at(run_dir: Path, manifest: dict) -> float | None:
    """The best evaluation mean of the trajectory up to a checkpoint, as its manifest's extra records it.

    A checkpoint written before extra held it falls back to the metrics, already cut back to it, so
    either way the evaluations of a discarded future do not count.
    """
    recorded = Trajectory.of_manifest(manifest)
    if recorded.best_evaluation_recorded:
        return recorded.best_evaluation
    return max((record[metrics.EVAL_MEAN] for record in runfiles.read_metrics(run_dir)
                if record[metrics.KIND] == metrics.EVAL),
               default=None)


# ---------------------------------------------------------------------------------------------
# A fork's first start: its trainer initialised from the parent's checkpoint that the fork holds


def initialise_fork(run_dir: Path, trainer: Trainer) -> StartingPoint:
    """A fork's first start (restore's case when the run has no checkpoint of its own yet)."""
    manifest, notice = initialise_from_parent(run_dir, trainer)
    # The parent's env restarts and best evaluation carry on; its wall time and event file are the parent's own.
    inherited = Trajectory.of_manifest(manifest)
    start = StartingPoint(notice=notice, trajectory=Trajectory(env_restarts=inherited.env_restarts))
    note_env_restarts(start, trainer, paths.INHERITED_CHECKPOINT)
    start.trajectory.best_evaluation = best_evaluation_at(run_dir, manifest)
    return start


def initialise_from_parent(run_dir: Path, trainer: Trainer) -> tuple[dict, str]:
    """Load the parent's checkpoint into a freshly built trainer as parent.json says; (its manifest, a notice).

    The trainer continues at the checkpoint's step with the parent's networks, optimizer, replay and
    random streams, unless the fork asked for a fresh optimizer or no replay; its own spec (built into
    the trainer) applies from the first step. metrics.jsonl starts as the parent's up to the checkpoint,
    also when a restart before the fork's first checkpoint begins again from the same place.
    """
    from rlsup.checkpoint.rng import restore_global_rng_state
    from rlsup.checkpoint.store import load_checkpoint

    parent = lineage.read_parent(run_dir)
    if parent is None:  # the same file at every restart: exit 2, never retried
        problem = lineage.parent_problem(run_dir) or f"{Path(run_dir) / lineage.PARENT_FILE} cannot be read"
        raise CheckpointProblem(f"{problem}: the fork cannot start")
    fresh = trainer.state_dict(include_replay=False)
    manifest, state = load_checkpoint(Path(run_dir) / paths.INHERITED_CHECKPOINT)
    trainer_state = dict(state["trainer"])
    if not parent.replay:
        trainer_state.pop("replay", None)
    if parent.fresh_optimizer:
        trainer_state = with_subtrees(trainer_state, fresh, OPTIMIZER_KEY)
    try:
        trainer.load_state_dict(trainer_state)
    except (ValueError, KeyError, RuntimeError) as error:  # a shape the fork's checks did not foresee
        # A spec error (exit 2), never retried: every restart would build the same trainer again.
        raise CheckpointProblem(f"{paths.INHERITED_CHECKPOINT} does not load into this job ({error}); "
                                "fork again with another NEW.toml, or --no-replay") from None
    restore_global_rng_state(state["rng"])
    lineage.copy_metrics_prefix(Path(run_dir) / lineage.INHERITED_METRICS, Path(run_dir) / paths.METRICS_FILE)
    notice = f"forked from {parent.origin}"
    log.info("%s (%s)", notice, parent.run_dir)
    return manifest, notice


def with_subtrees(state: Any, fresh: Any, key: str) -> Any:
    """state with every subtree under key taken from fresh, at the same place in the tree."""
    if not isinstance(state, dict) or not isinstance(fresh, dict):
        return state
    return {name: fresh[name] if name == key and name in fresh else
            with_subtrees(value, fresh.get(name), key) for name, value in state.items()}
