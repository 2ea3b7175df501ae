"""A fork's first start: its trainer initialised from the parent's checkpoint that the fork holds."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from rlsup import paths
from rlsup.run import lineage
from rlsup.algos.contract import Trainer
from rlsup.checkpoint.manifest import CheckpointProblem
from rlsup.checkpoint.resume import StartingPoint, best_evaluation_at, note_env_restarts
from rlsup.checkpoint.rng import restore_global_rng_state
from rlsup.checkpoint.store import load_checkpoint

log = logging.getLogger("rlsup.worker")
# Where an algorithm's trainer state keeps optimizer state: --fresh-optimizer replaces every subtree so named.
OPTIMIZER_KEY = "optimizer"


def initialise_fork(run_dir: Path, trainer: Trainer) -> StartingPoint:
    """A fork's first start (checkpoint/resume.py's restore when the run has no checkpoint of its own yet)."""
    manifest, notice = initialise_from_parent(run_dir, trainer)
    start = StartingPoint(notice=notice)
    note_env_restarts(start, manifest, trainer, lineage.INHERITED_CHECKPOINT)
    start.best_evaluation = best_evaluation_at(run_dir, manifest)
    return start


def initialise_from_parent(run_dir: Path, trainer: Trainer) -> tuple[dict, str]:
    """Load the parent's checkpoint into a freshly built trainer as parent.json says; (its manifest, a notice).

    The trainer continues at the checkpoint's step with the parent's networks, optimizer, replay and
    random streams, unless the fork asked for a fresh optimizer or no replay; its own spec (built into
    the trainer) applies from the first step. metrics.jsonl starts as the parent's up to the checkpoint,
    also when a restart before the fork's first checkpoint begins again from the same place.
    """
    parent = lineage.read_parent(run_dir)
    if parent is None:  # the same file at every restart: exit 2, never retried
        problem = lineage.parent_problem(run_dir) or f"{Path(run_dir) / lineage.PARENT_FILE} cannot be read"
        raise CheckpointProblem(f"{problem}: the fork cannot start")
    fresh = trainer.state_dict(include_replay=False)
    manifest, state = load_checkpoint(Path(run_dir) / lineage.INHERITED_CHECKPOINT)
    trainer_state = dict(state["trainer"])
    if not parent.replay:
        trainer_state.pop("replay", None)
    if parent.fresh_optimizer:
        trainer_state = with_subtrees(trainer_state, fresh, OPTIMIZER_KEY)
    try:
        trainer.load_state_dict(trainer_state)
    except (ValueError, KeyError, RuntimeError) as error:  # a shape the fork's checks did not foresee
        # A spec error (exit 2), never retried: every restart would build the same trainer again.
        raise CheckpointProblem(f"{lineage.INHERITED_CHECKPOINT} does not load into this job ({error}); "
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
