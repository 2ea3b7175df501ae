"""Forks: a run started from another run's checkpoint, the parent.json that records it, and the lineage it makes."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import time
import typing
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import rlsup
from rlsup import atomic, own_files, paths
from rlsup.run import files as runfiles
from rlsup import spec as specs
from rlsup.checkpoint import choose, manifest as manifests
from rlsup.checkpoint.checksums import safe_relative_path
from rlsup.checkpoint.manifest import BEST, CheckpointEntry, CheckpointProblem
from rlsup.spec.values import check_value

PARENT_FILE = "parent.json"  # where a fork came from: its parent run, checkpoint and step, and how it began
# The parent's metrics.jsonl up to that checkpoint: every first start of the fork (a crash before its first
# checkpoint, `rlsup run --resume --from-scratch`) begins its metrics.jsonl with it, so its curves start there.
INHERITED_METRICS = "parent-metrics.jsonl"
LINEAGE_DEPTH = 64  # parents followed at most: a hand-made cycle of parent.json files must not loop forever

# Fields a fork must share with its parent, and why: what the checkpoint's state was made for.
SHARED_FIELDS = {
    "job.algo": "the checkpoint belongs to another algorithm",
    # Each env's saved mid-episode state and the networks' input were made for these settings.
    **{f"env.{name}": "the envs' saved state and the networks' input were made for it"
       for name in ("id", "preset", "image_layout", "num_envs", "sticky_actions", "clip_rewards", "episodic_life",
                    "noop_max", "frame_skip", "frame_stack", "max_episode_steps", "fire_reset")},
    "job.seed": "a fork continues its parent's random streams, so another seed would change only its evaluations",
}
# A fork loads its parent's optimizer state, which only an optimizer of the same kind can take.
OPTIMIZER_FIELDS = {"dqn": ("optimizer",)}
NETWORK_FIELDS = {"dqn": ("hidden_sizes", "network", "activation"),
                  "vtrace": ("hidden_sizes", "network", "activation", "feature_size", "envs_per_actor",
                             "unroll_length")}
# [[replay]] fields that shape a replay's saved state (storage, writer, sampler); the others only tune sampling.
REPLAY_FIELDS = ("kind", "capacity", "distance", "elite_insertion", "strategy")


class ForkRefused(ValueError):
    """A fork that cannot be made, in one sentence (exit 2)."""


@dataclass(frozen=True)
class Parent:
    """What a fork's parent.json says: where it came from and how it was initialised."""

    run_dir: str       # the parent's run directory, as it was when the fork was made
    job_name: str
    job_id: int | None  # None: a foreground run, or a run no job of this home owns
    step: int          # the step of the parent's checkpoint, where the fork starts
    checkpoint: str    # the parent's checkpoint directory name
    reason: str        # that checkpoint's reason (interval, pause, final, best...)
    fingerprint: str   # the parent's network fingerprint at that checkpoint
    fresh_optimizer: bool  # whether the optimizer started afresh (--fresh-optimizer)
    replay: bool       # whether the parent's replay was carried over
    time: float        # when the fork was made (Unix time)
    rlsup_version: str  # the rlsup that made it

    @property
    def label(self) -> str:
        job = f"job {self.job_id} " if self.job_id is not None else ""
        return f"{job}{self.job_name} at step {self.step:,}"

    @property
    def origin(self) -> str:
        """The parent, its checkpoint and fingerprint, and what was not carried over."""
        options = [option for option, on in (("fresh optimizer", self.fresh_optimizer),
                                             ("no replay", not self.replay)) if on]
        extra = f"; {', '.join(options)}" if options else ""
        return f"{self.label} ({self.checkpoint}, fingerprint {self.fingerprint[:12]}{extra})"

    def describe(self) -> str:
        """One line for status and the worker's log."""
        # The parent's run, said as the parent's: "; run DIR" at the end of the fork's message read as the fork's.
        return f"forked from {self.origin}; the parent's run is {self.run_dir}"


def read_parent(run_dir: Path) -> Parent | None:
    """The run's parent.json, or None for a run that is not a fork (or whose file cannot be read: parent_problem)."""
    parent = _parse_parent(Path(run_dir) / PARENT_FILE)
    return parent if isinstance(parent, Parent) else None


def start_step(run_dir: Path) -> int:
    """The step a new run starts from: a fork's parent checkpoint's (a queued fork of step 40,000 read "0/45,000"
    until its worker reported), else 0."""
    parent = read_parent(run_dir)
    return parent.step if parent is not None else 0


def parent_problem(run_dir: Path) -> str | None:
    """Why a fork's parent.json cannot be read, in one sentence naming it and the field; None when it reads (or
    the run is no fork)."""
    path = Path(run_dir) / PARENT_FILE
    if not path.exists():
        return None
    parent = _parse_parent(path)
    return parent if isinstance(parent, str) else None


def _parse_parent(path: Path) -> Parent | str | None:
    """parent.json as a Parent, or why it is not one. A run may come from someone else: every field is checked
    for its type where it is read, so that "step": "x" is this sentence, not a traceback in whatever formats it."""
    data = own_files.read_json(path)
    if data is None:
        return None if not path.exists() else f"{path}: not a JSON object"
    for name, hint in typing.get_type_hints(Parent).items():
        if name not in data:
            return f"{path}: {name} is missing"
        optional = type(None) in typing.get_args(hint)
        kind = next(arg for arg in typing.get_args(hint) if arg is not type(None)) if optional else hint
        problem = None if optional and data[name] is None else check_value(data[name], kind, {})
        if problem:
            return f"{path}: {name} {problem}"
    return Parent(**{name: data[name] for name in Parent.__dataclass_fields__})


def ancestors(run_dir: Path) -> list[Parent]:
    """The run's parent, its parent's parent, and so on, nearest first."""
    found: list[Parent] = []
    seen = {str(Path(run_dir).resolve())}
    parent = read_parent(run_dir)
    while parent is not None and len(found) < LINEAGE_DEPTH:
        found.append(parent)
        if parent.run_dir in seen:
            break
        seen.add(parent.run_dir)
        parent = read_parent(Path(parent.run_dir))
    return found


def lineage_line(run_dir: Path) -> str | None:
    """"A at step 1,000 → B at step 2,000 → this" from the oldest ancestor, or None for a run that is not a fork."""
    chain = ancestors(run_dir)
    if not chain:
        return None
    return " → ".join([parent.label for parent in reversed(chain)] + ["this"])


# ---------------------------------------------------------------------------------------------
# What a fork may change


def compatibility_problem(parent: specs.JobSpec, fork: specs.JobSpec, *, replay: bool,
                          fresh_optimizer: bool = False) -> str | None:
    """Why fork's spec cannot start from a checkpoint of a run with parent's spec, naming the field; or None.

    Learning rates, discounts, exploration, schedules, batch sizes and the live fields may differ;
    replay shapes may differ only when the replay is not carried over, the optimizer's kind only when its
    state is not.
    """
    for name, why in SHARED_FIELDS.items():
        section, field = name.split(".")
        old, new = getattr(getattr(parent, section), field), getattr(getattr(fork, section), field)
        if old != new:
            return f"{name} differs from the parent's {_show(old)}: {why}"
    algo = parent.job.algo
    for field in NETWORK_FIELDS.get(algo, ()):
        old, new = getattr(getattr(parent, algo), field), getattr(getattr(fork, algo), field)
        if old != new and not (field == "network" and new == "auto"):
            why = ("the parent's weights were learned with it" if field == "activation"
                   else "the networks cannot be loaded")
            return f"{algo}.{field} differs from the parent's {_show(old)}: {why}"
    for field in () if fresh_optimizer else OPTIMIZER_FIELDS.get(algo, ()):
        old, new = getattr(getattr(parent, algo), field), getattr(getattr(fork, algo), field)
        if old != new:
            return (f"{algo}.{field} differs from the parent's {_show(old)}: the saved optimizer state is for "
                    "it; fork with --fresh-optimizer to start the optimizer afresh")
    return replay_problem(parent, fork) if replay else None


def perturb_refused(spec: specs.JobSpec, name: str) -> str | None:
    """Why a fork of a run with spec refuses another value of the number field `name` (PBT perturbs it), or None."""
    section, field = name.split(".", 1)
    changed = spec.replace(section, **{field: getattr(getattr(spec, section), field) * 2 + 1})
    return compatibility_problem(spec, changed, replay=True)


def replay_problem(parent: specs.JobSpec, fork: specs.JobSpec) -> str | None:
    """Why the parent's replays cannot be loaded into the fork's, or None."""
    advice = "its replay cannot be loaded; fork with --no-replay to start with an empty one"
    if len(parent.replay) != len(fork.replay):
        return f"replay has {len(fork.replay)} tables, the parent's {len(parent.replay)}: {advice}"
    for index, (old, new) in enumerate(zip(parent.replay, fork.replay)):
        for field in REPLAY_FIELDS:
            if getattr(old, field) != getattr(new, field):
                return (f"replay[{index}].{field} differs from the parent's {_show(getattr(old, field))}: "
                        f"{advice}")
    return None


def _show(value: object) -> str:
    return json.dumps(value) if isinstance(value, (str, list, bool)) else repr(value)


def fork_advice(job_id: int, path: str | Path, current: specs.JobSpec, edited: specs.JobSpec) -> str:
    """The command that does what a refused identity edit asked, from the job's newest checkpoint."""
    file = shlex.quote(str(path))
    for options, leaving in FORK_OPTIONS:
        if compatibility_problem(current, edited, replay="--no-replay" not in options,
                                 fresh_optimizer="--fresh-optimizer" in options) is None:
            return (f"to train with it from this run's newest checkpoint{leaving}: "
                    f"rlsup fork {job_id} --checkpoint latest {' '.join([*options, file])}")
    return f"{compatibility_problem(current, edited, replay=False)}; as a new run: rlsup submit --copy {file}"


# What a fork can leave behind, least first: the advice names the first set of options that makes it possible.
FORK_OPTIONS = (((), ""), (("--no-replay",), ", with an empty replay"),
                (("--fresh-optimizer",), ", with a fresh optimizer"),
                (("--no-replay", "--fresh-optimizer"), ", with an empty replay and a fresh optimizer"))


# ---------------------------------------------------------------------------------------------
# Making a fork's run directory (before its job is queued)


@dataclass(frozen=True)
class ForkRequest:
    """The parent run and checkpoint a fork starts from, and what it leaves behind."""

    parent_run: Path
    parent_job_name: str
    parent_job_id: int | None
    entry: CheckpointEntry
    fresh_optimizer: bool = False
    replay: bool = True
    latest: bool = False  # asked for as "latest": a checkpoint rotated away is replaced by the newest again
    linked: Path | None = None  # where its files were linked into the fork, out of reach of the parent's rotation

    @property
    def carries_replay(self) -> bool:
        """A best checkpoint has no replay, nor has one written with [checkpoint] replay = false."""
        return self.replay and self.entry.reason != BEST and holds_replay(self.linked or self.entry.path)


def holds_replay(checkpoint_dir: Path) -> bool:
    """Whether a checkpoint's trainer state has a replay (its state.json is small: the data are files)."""
    tree = own_files.read_json(Path(checkpoint_dir) / manifests.STATE_FILE) or {}
    trainer = tree.get("trainer")
    return isinstance(trainer, dict) and "replay" in trainer


def check_fork(request: ForkRequest, fork: specs.JobSpec) -> None:
    """Refuse (ForkRefused) a fork spec that cannot start from the request's checkpoint."""
    parent = runfiles.read_run_spec(request.parent_run)
    problem = compatibility_problem(parent, fork, replay=request.carries_replay,
                                    fresh_optimizer=request.fresh_optimizer)
    if problem is None and fork.job.total_steps <= request.entry.step:
        problem = (f"job.total_steps = {fork.job.total_steps} is not beyond the checkpoint's step "
                   f"{request.entry.step}: steps are counted from the parent's start, so raise it")
    if problem is not None:
        raise ForkRefused(problem)


def prepare_fork(run_dir: Path, request: ForkRequest, fork: specs.JobSpec) -> Parent:
    """Fill a new run directory with what its worker starts from; parent.json is written last.

    The checkpoint is hard-linked (its files are never rewritten), copied across filesystems, and
    verified in its new place; the parent's metrics up to that checkpoint are kept (INHERITED_METRICS).
    """
    request = link_verified(Path(run_dir) / paths.INHERITED_CHECKPOINT, request)
    check_fork(request, fork)
    copy_metrics_prefix(request.parent_run / paths.METRICS_FILE, Path(run_dir) / INHERITED_METRICS,
                        int(request.entry.metrics_bytes))
    parent = Parent(run_dir=str(request.parent_run), job_name=request.parent_job_name,
                    job_id=request.parent_job_id, step=request.entry.step, checkpoint=request.entry.path.name,
                    reason=request.entry.reason, fingerprint=request.entry.fingerprint,
                    fresh_optimizer=request.fresh_optimizer, replay=request.carries_replay, time=time.time(),
                    rlsup_version=rlsup.__version__)
    atomic.write_json(Path(run_dir) / PARENT_FILE, asdict(parent))
    return parent


def link_verified(target: Path, request: ForkRequest) -> ForkRequest:
    """The request's checkpoint hard-linked under target first, then verified there, where no rotation of the
    parent's can reach it; for "latest", one rotated away meanwhile gives way to the newest again. Returns the
    request with the entry that was linked."""
    for _ in range(choose.ROTATED_TRIES):
        shutil.rmtree(target, ignore_errors=True)
        try:
            link_checkpoint(request.entry, target)
        except FileNotFoundError as error:
            if not request.latest:
                raise ForkRefused(f"checkpoint {request.entry.path.name} went away while forking ({error.filename}): "
                                  "the parent rotated it out; fork again") from None
            request = replace(request, entry=resolve_checkpoint(request.parent_run, "latest"))
            continue
        problem = manifests.verify(target)
        if problem is not None:
            raise ForkRefused(f"checkpoint {request.entry.path} does not verify: {problem}")
        return replace(request, linked=target)
    raise ForkRefused(f"the parent's checkpoints were rotated away {choose.ROTATED_TRIES} times while linked: "
                      "its worker replaces them faster than they can be forked; fork again, or from a step")


def link_checkpoint(entry: CheckpointEntry, target: Path) -> None:
    """Every file the checkpoint's manifest lists, and the manifest, linked (or copied) under target; raises
    FileNotFoundError when one went away. A name that leaves the checkpoint is refused before anything is linked."""
    names = [*entry.manifest.get("files", {}), manifests.MANIFEST_FILE]
    if any(safe_relative_path(target, name) is None for name in names):
        raise ForkRefused(f"checkpoint {entry.path} lists a file outside it: refused")
    for name in names:
        source, destination = entry.path / name, target / name
        paths.ensure_private_dir(destination.parent)
        try:  # a link in the parent's checkpoint stays a link, which verification refuses: never its target
            os.link(source, destination, follow_symlinks=False)
        except OSError:  # another filesystem, or links not allowed: a copy, checked like the link (a source
            # that went away fails the copy too)
            shutil.copy2(source, destination, follow_symlinks=False)


def copy_metrics_prefix(source: Path, target: Path, length: int | None = None) -> None:
    """The first length bytes of source (all of it when None; nothing when it is missing) as target."""
    try:  # never through a link, and never past length: a FIFO or /dev/zero would be read for ever
        with os.fdopen(own_files.open_own(source, os.O_RDONLY), "rb") as handle:
            data = handle.read(length) if length is not None else handle.read()
    except FileNotFoundError:
        data = b""
    except own_files.NotOwnFile as error:
        raise ForkRefused(str(error)) from None
    atomic.write_bytes(target, data)


def resolve_checkpoint(run_dir: Path, which: str) -> CheckpointEntry:
    """The parent's checkpoint a fork starts from: latest (newest verified), best, or a step."""
    try:
        return choose.resolve(run_dir, which)
    except CheckpointProblem as error:
        raise ForkRefused(str(error)) from None
