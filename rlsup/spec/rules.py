"""Rules that involve more than one field: checked when a job file loads, and by the replay mixer it builds."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Protocol, Sequence

from rlsup.spec import registry
from rlsup.spec.fields import EnvSection, JobSpec, ReplaySection

# Ratios come from TOML floats (0.1 + 0.2 != 0.3), so sums and shares are compared with this slack.
RATIO_TOLERANCE = 1e-9
# The ALE's frame limit of an episode (max_num_frames_per_episode) is a C int.
ALE_FRAMES_MAX = 2**31 - 1
# What `import` takes: dotted identifiers (ASCII, as module files are named).
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Violation:
    """A broken rule: the key path it is reported at, and which [[replay]] table it concerns (None: several)."""

    path: tuple
    message: str
    table: int | None = None


class ReplayShare(Protocol):
    """What the batch rules read of a replay: a [[replay]] table, or the mixer's Replay built from one."""

    @property
    def kind(self) -> str: ...

    @property
    def capacity(self) -> int: ...

    @property
    def ratio(self) -> float: ...


def job_violations(spec: JobSpec) -> list[Violation]:
    """Every cross-field rule a loaded job file breaks."""
    violations = share_violations(spec.replay, spec.batch_size)
    try:
        # The registry (built-ins and plugins, torch-free) knows the algorithms and what their replays hold.
        item = registry.get(spec.job.algo).replay_item
    except registry.UnknownAlgorithm as unknown:
        violations.append(Violation(("job", "algo"), str(unknown)))
    else:
        for index, replay in enumerate(spec.replay):
            violations.extend(item_violations(index, replay, item))
        # An algorithm that trains continuous actions only (sac) is refused here; one that trains both, once its
        # env's actions are known (check_env).
        discrete = registry.ACTION_KINDS[0]
        violations.extend(logits_distance_violations(spec.replay, discrete not in registry.get(spec.job.algo)
                                                     .action_kinds))
        violations.extend(fused_violations(spec, registry.get(spec.job.algo)))
    if spec.dqn.epsilon_end > spec.dqn.epsilon_start:
        violations.append(Violation(("dqn", "epsilon_end"), "must not exceed epsilon_start"))
    if spec.env.preset == "atari" and not spec.env.id.startswith("ALE/"):
        violations.append(Violation(("env", "id"), f"the atari preset needs an ALE/ id, not {spec.env.id!r}"))
    if spec.env.preset == "atari" and spec.env.max_episode_steps * spec.env.frame_skip > ALE_FRAMES_MAX:
        violations.append(Violation(("env", "max_episode_steps"), f"{spec.env.max_episode_steps:,} steps of "
                                    f"{spec.env.frame_skip} frames: the ALE counts at most {ALE_FRAMES_MAX:,} frames "
                                    "an episode (0: the game's own limit)"))
    violations.extend(Violation(("env", "imports"), f"{module!r} is not a Python module name (dotted identifiers, "
                                "as in import my_envs.tasks)") for module in spec.env.imports
                      if not MODULE_NAME.fullmatch(module))
    if spec.job.device == "cpu" and spec.job.gpus:
        violations.append(Violation(("job", "gpus"), "a job with device = \"cpu\" cannot reserve GPUs"))
    return violations


# The [env] settings that wrap a gymnasium env (the atari preset's aside, which the preset check refuses).
FUSED_UNWRAPPED = ("sticky_actions", "max_episode_steps", "episodic_life")


def fused_violations(spec: JobSpec, algorithm: registry.Algorithm) -> list[Violation]:
    """What [env] source = "fused" asks of the rest of the file: an algorithm that trains on it, no gymnasium
    wrapping, and for V-trace's one-process loop, each batch the batch_size games' fresh unrolls, trained on once."""
    if spec.env.source != "fused":
        return []
    if "fused" not in algorithm.env_sources:
        trainers = [name for name in registry.algorithm_names() if "fused" in registry.get(name).env_sources]
        return [Violation(("env", "source"), f"algo {algorithm.name!r} trains on gymnasium envs only; fused games "
                                             f"are trained by {', '.join(map(repr, trainers))}")]
    violations = []
    env = spec.env
    if env.preset != "classic" or env.vectoriser != "auto":
        path = ("env", "preset") if env.preset != "classic" else ("env", "vectoriser")
        violations.append(Violation(path, "a fused game steps its batch by itself, with no gymnasium wrapper: leave "
                                          "preset and vectoriser unset"))
    unwrapped = EnvSection()
    violations += [Violation(("env", name), "a fused game plays by its own rules (MinAtar's: sticky actions 0.1, no "
                                            "step limit) and rlsup wraps it in nothing: leave it unset")
                   for name in FUSED_UNWRAPPED if getattr(env, name) != getattr(unwrapped, name)]
    if algorithm.name == "vtrace":
        violations += fused_vtrace_violations(spec)
    return violations



def fused_vtrace_violations(spec: JobSpec) -> list[Violation]:
    """V-trace's one-process loop on fused games: batch_size games, each batch of unrolls trained on once."""
    violations = []
    settings = spec.vtrace
    if spec.env.num_envs != 1:
        violations.append(Violation(("env", "num_envs"), "V-trace steps [vtrace] batch_size fused games, one unroll "
                                                         "of each per update: set batch_size, not num_envs"))
    replays = spec.replay
    if len(replays) != 1 or replays[0].kind != "queue" or replays[0].capacity != settings.batch_size:
        path = ("replay", 0, "kind") if replays else ("replay",)
        violations.append(Violation(path, "the fused loop trains each batch of unrolls once, as it is made: one "
                                          f"[[replay]] table, kind = \"queue\", capacity = {settings.batch_size} "
                                          "(batch_size)"))
    for name in ("normalize_rewards", "normalize_observations"):
        if getattr(settings, name):
            violations.append(Violation(("vtrace", name), "not in the fused loop yet: train without it"))
    return violations


KL_DIV_NEEDS_LOGITS = ("kl_div compares the policies of discrete actions, and a continuous policy has no logits: "
                       "use ln_norm or cos_dist")


def logits_distance_violations(replays: Sequence[ReplaySection], continuous: bool) -> list[Violation]:
    """Elite and attentive replays that compare logits (kl_div), where the actions are continuous."""
    if not continuous:
        return []
    return [Violation(("replay", index, "distance"), KL_DIV_NEEDS_LOGITS, index) for index, replay in enumerate(replays)
            if replay.kind in ("elite", "attentive") and replay.distance == "kl_div"]


def share_violations(replays: Sequence[ReplayShare], batch_size: int) -> list[Violation]:
    """Ratios that do not split every batch into whole shares of at least one item, and queues below their share."""
    violations = []
    total = sum(replay.ratio for replay in replays)
    if not math.isclose(total, 1.0, rel_tol=0.0, abs_tol=RATIO_TOLERANCE):
        violations.append(Violation(("replay", 0, "ratio"), f"replay ratios must sum to 1, they sum to {total:g}"))
    for index, replay in enumerate(replays):
        share = replay.ratio * batch_size
        whole = round(share)
        if whole < 1 or abs(share - whole) > RATIO_TOLERANCE * batch_size:
            violations.append(Violation(("replay", index, "ratio"), f"ratio {replay.ratio:g} of batch {batch_size} "
                                        f"is {share:g} items; it must be a whole number of at least 1", index))
        if replay.kind == "queue" and replay.capacity < whole:
            violations.append(Violation(("replay", index, "capacity"), f"a queue must hold at least its share of "
                                        f"each batch: capacity {replay.capacity} is below its share of {whole} "
                                        "unrolls", index))
    return violations


def whole_shares(replays: Sequence[ReplayShare], batch_size: int) -> list[int]:
    """Items each replay gives a batch, for ratios share_violations accepts."""
    return [round(replay.ratio * batch_size) for replay in replays]


def item_violations(index: int, replay: ReplaySection, item: str) -> list[Violation]:
    """What one [[replay]] table cannot do with the items it holds ("transitions" or "unrolls")."""
    path = ("replay", index)
    violations = []
    if replay.kind == "queue" and item != "unrolls":
        violations.append(Violation(path + ("kind",), "a queue replay holds unrolls for vtrace; dqn's transitions "
                                    "use standard, elite or attentive", index))
    if replay.elite_insertion and item != "unrolls":
        # Transition rows are consecutive frames of an episode: overwriting one in the middle
        # would break the stacks and n-step windows of its neighbours.
        violations.append(Violation(path + ("elite_insertion",), "elite_insertion works on unrolls only (vtrace), "
                                    "not on transitions (dqn)", index))
    if replay.min_size > replay.capacity:
        violations.append(Violation(path + ("min_size",), f"must not exceed capacity: min_size {replay.min_size} "
                                    f"exceeds its capacity {replay.capacity}, so it would never be ready", index))
    return violations
