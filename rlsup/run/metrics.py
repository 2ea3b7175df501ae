"""metrics.jsonl's record kinds and keys (DESIGN.md section 6): one JSON object a line, {"t", "step", "kind", ...}."""
from __future__ import annotations

# Every record's keys: the wall time it was written, the training step it belongs to, and its kind.
TIME = "t"
STEP = "step"
KIND = "kind"
COMMON_KEYS = frozenset({TIME, STEP, KIND})

# The kinds, each with the keys of its own that readers look up (a train record adds the trainer's
# train_metrics(), whose names each algorithm chooses).
TRAIN = "train"          # every [log] every_steps: steps per second and the trainer's losses
STEPS_PER_SECOND = "steps_per_second"
EPISODE = "episode"      # each finished training episode, written by the trainer
EPISODE_RETURN = "return"
EPISODE_LENGTH = "length"
EVAL = "eval"            # every [eval] every_steps: the greedy policy's episodes
EVAL_MEAN = "mean"
EVAL_RETURNS = "returns"
CHECKPOINT = "checkpoint"  # written before the checkpoint records the file's length, so a resume keeps it
CHECKPOINT_REASON = "reason"
CHECKPOINT_FINGERPRINT = "fingerprint"
