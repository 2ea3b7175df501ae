"""Job files: TOML parsed into frozen dataclasses whose fields carry their default, doc and edit class."""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import tomli_w

from rlsup.algos import registry
from rlsup.fieldcheck import CAPACITY_MAX, COUNT_MAX, INT64_MAX, STEPS_MAX, check_value

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

# Edit classes (DESIGN.md section 5).
LIVE = "live"          # applied to a running worker by SIGHUP
RESUME = "resume"      # applied by pause -> resume
IDENTITY = "identity"  # refused: it would change what the run learns
EDIT_CLASSES = (LIVE, RESUME, IDENTITY)


def setting(default: Any, doc: str, edit: str, *, minimum: float | None = None,
            maximum: float | None = None, exclusive_minimum: bool = False) -> Any:
    """Declare a spec field: its default, one line of documentation and its edit class."""
    assert edit in EDIT_CLASSES, edit
    metadata = {"doc": doc, "edit": edit, "minimum": minimum, "maximum": maximum,
                "exclusive_minimum": exclusive_minimum}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class JobSection:
    """[job]: what the run is and how the supervisor treats it."""

    name: str = setting("", "Job name; defaults to the file's stem.", LIVE)
    algo: str = setting("dqn", "Training algorithm: dqn, vtrace (IMPALA), or one a plugin registers.", IDENTITY)
    seed: int = setting(0, "Seed of every random stream of the run.", IDENTITY, minimum=0,
                   maximum=INT64_MAX)
    total_steps: int = setting(100_000, "Environment steps to train for; raise it to extend a run.",
                               LIVE, minimum=1, maximum=STEPS_MAX)
    device: Literal["auto", "cpu", "cuda"] = setting(
        "auto", "Where the learner runs: auto picks cuda when a GPU is visible.", RESUME)
    gpus: int = setting(0, "GPUs the daemon reserves for this job (CUDA_VISIBLE_DEVICES).", RESUME,
                        minimum=0, maximum=1024)
    threads: int = setting(1, "Torch CPU threads of the worker; results are bit-exact for a fixed count.",
                           RESUME, minimum=1, maximum=4096)
    priority: int = setting(0, "Higher runs first; ties go by submission order.", LIVE, minimum=-(2 ** 31),
                            maximum=2 ** 31 - 1)
    max_restarts: int = setting(3, "Restarts from the latest checkpoint after a crash.", LIVE, minimum=0,
                           maximum=10_000)
    stop_grace_s: float = setting(60.0, "Seconds a pausing worker gets before SIGKILL.", LIVE, minimum=0)


@dataclass(frozen=True)
class EnvSection:
    """[env]: the environment and its preprocessing."""

    id: str = setting("CartPole-v1", "Gymnasium id, e.g. CartPole-v1 or ALE/Pong-v5.", IDENTITY)
    preset: Literal["classic", "atari"] = setting(
        "classic", "classic: the env as registered; atari: DeepMind preprocessing.", IDENTITY)
    num_envs: int = setting(1, "Environments stepped side by side by the worker.", IDENTITY, minimum=1,
                           maximum=COUNT_MAX)
    sticky_actions: float = setting(0.0, "Atari repeat_action_probability (0.25 for sticky actions).",
                                    IDENTITY, minimum=0.0, maximum=1.0)
    clip_rewards: bool = setting(False, "Clip learning rewards to their sign (game scores stay raw).",
                                 IDENTITY)
    episodic_life: bool = setting(False, "A lost life ends the episode for learning, not the game.",
                                  IDENTITY)
    noop_max: int = setting(30, "Atari: at most this many no-ops after a reset.", IDENTITY, minimum=0,
                           maximum=100_000)
    frame_skip: int = setting(4, "Atari: frames each action is repeated for.", IDENTITY, minimum=1,
                             maximum=1000)
    frame_stack: int = setting(4, "Atari: frames stacked into one observation.", IDENTITY, minimum=1,
                              maximum=1000)
    max_episode_steps: int = setting(0, "Truncate episodes after this many steps (0: env default).",
                                     IDENTITY, minimum=0, maximum=STEPS_MAX)
    fire_reset: bool = setting(True, "Atari: press FIRE after a reset and after a lost life, in games whose "
                                     "actions include FIRE (FireResetEnv of CleanRL and stable-baselines3).",
                               IDENTITY)


@dataclass(frozen=True)
class DqnSection:
    """[dqn]: Deep Q-learning (double, n-step)."""

    lr: float = setting(1e-4, "Adam learning rate at step 0.", IDENTITY, minimum=0.0, exclusive_minimum=True)
    lr_end: float = setting(0.0, "Learning rate reached at lr_end_step, and kept after it.", IDENTITY,
                            minimum=0.0)
    lr_end_step: int = setting(0, "Absolute step at which the learning rate has moved linearly from lr to "
                                  "lr_end (0: lr throughout).", IDENTITY, minimum=0, maximum=STEPS_MAX)
    gamma: float = setting(0.99, "Discount factor.", IDENTITY, minimum=0.0, maximum=1.0)
    batch_size: int = setting(32, "Transitions per gradient step.", IDENTITY, minimum=1,
                             maximum=COUNT_MAX)
    learning_starts: int = setting(80_000, "Step at which gradient updates begin.", IDENTITY, minimum=0,
                                  maximum=STEPS_MAX)
    train_every: int = setting(4, "Environment steps between rounds of gradient steps.", IDENTITY,
                               minimum=1, maximum=STEPS_MAX)
    gradient_steps: int = setting(1, "Gradient steps per round.", IDENTITY, minimum=1,
                                 maximum=COUNT_MAX)
    target_update_every: int = setting(1000, "Environment steps between target-network updates.",
                                       IDENTITY, minimum=1, maximum=STEPS_MAX)
    tau: float = setting(1.0, "Target update weight: 1 copies, below 1 is Polyak averaging.", IDENTITY,
                         minimum=0.0, maximum=1.0, exclusive_minimum=True)
    double: bool = setting(True, "Double DQN: the online network picks the next action.", IDENTITY)
    n_step: int = setting(1, "Steps of reward summed into each target.", IDENTITY, minimum=1,
                         maximum=100_000)
    hidden_sizes: list[int] = setting([256, 256], "Widths of the MLP's hidden layers (vector obs).",
                                      IDENTITY, minimum=1, maximum=COUNT_MAX)
    loss: Literal["huber", "mse"] = setting("huber", "Temporal-difference loss.", IDENTITY)
    max_grad_norm: float = setting(10.0, "Clip the gradient's norm to this (0: no clipping).", IDENTITY,
                                   minimum=0.0)
    epsilon_start: float = setting(1.0, "Exploration rate at step 0.", IDENTITY, minimum=0.0, maximum=1.0)
    epsilon_end: float = setting(0.01, "Exploration rate from epsilon_end_step on.", IDENTITY,
                                 minimum=0.0, maximum=1.0)
    epsilon_end_step: int = setting(1_000_000, "Absolute step at which epsilon reaches epsilon_end.",
                                    IDENTITY, minimum=1, maximum=STEPS_MAX)


@dataclass(frozen=True)
class ReplaySection:
    """[[replay]]: one experience replay and its share of every batch."""

    kind: Literal["standard", "queue", "elite", "attentive"] = setting(
        "standard", "standard: uniform; queue: FIFO of fresh unrolls (vtrace); elite, attentive: most on-policy "
        "or most similar to now, from uniform candidates.", IDENTITY)
    capacity: int = setting(100_000, "Items the replay holds (transitions for dqn, unrolls for vtrace).",
                            IDENTITY, minimum=1, maximum=CAPACITY_MAX)
    ratio: float = setting(1.0, "Share of each batch drawn from this replay; shares sum to 1.", IDENTITY,
                           minimum=0.0, maximum=1.0, exclusive_minimum=True)
    min_size: int = setting(0, "Items needed before sampling (0: a full queue, else max(20% of capacity, "
                               "10 x batch)).", IDENTITY, minimum=0, maximum=CAPACITY_MAX)
    strategy: int = setting(1, "Elite/attentive selection: 1 nearest, 2 rank-stratified, 3 least-sampled, "
                               "4 least-sampled per window.", IDENTITY, minimum=1, maximum=4)
    distance: Literal["ln_norm", "cos_dist", "kl_div"] = setting(
        "ln_norm", "How far stored features are from current ones.", IDENTITY)
    p: float = setting(2.0, "The norm's p for distance = ln_norm.", IDENTITY, minimum=0.0, exclusive_minimum=True)
    lambda_batch_multiplier: float = setting(6.0, "Candidates per sampled item at the start (lambda_0).",
                                             IDENTITY, minimum=1.0)
    alfa_annealing_factor: float = setting(2.0, "Stretches lambda's horizon: lambda reaches 1 at environment step "
                                                "anneal_steps * alfa.", IDENTITY, minimum=0.0,
                                           exclusive_minimum=True)
    anneal_steps: int = setting(1_000_000, "Environment steps (the unit of total_steps) over which lambda falls "
                                           "linearly to 1, times alfa.", IDENTITY, minimum=1, maximum=STEPS_MAX)
    elite_insertion: bool = setting(False, "Once full, overwrite the farthest of some candidates, not the "
                                           "oldest.", IDENTITY)
    insertion_candidates: int = setting(32, "Candidates drawn for elite insertion.", IDENTITY, minimum=1,
                                       maximum=COUNT_MAX)


@dataclass(frozen=True)
class VtraceSection:
    """[vtrace]: actor/learner V-trace (IMPALA)."""

    actors: int = setting(2, "Actor processes, each with a CPU copy of the policy.", RESUME, minimum=1,
                         maximum=4096)
    envs_per_actor: int = setting(4, "Environments each actor steps side by side.", IDENTITY, minimum=1,
                                 maximum=COUNT_MAX)
    unroll_length: int = setting(20, "Steps per unroll (T).", IDENTITY, minimum=1, maximum=100_000)
    batch_size: int = setting(32, "Unrolls per learner batch.", IDENTITY, minimum=1, maximum=COUNT_MAX)
    lr: float = setting(6e-4, "RMSProp learning rate at step 0.", IDENTITY, minimum=0.0, exclusive_minimum=True)
    lr_end: float = setting(0.0, "Learning rate reached at lr_end_step, and kept after it.", IDENTITY,
                            minimum=0.0)
    lr_end_step: int = setting(50_000_000, "Absolute step at which the learning rate has moved linearly from lr "
                                           "to lr_end.", IDENTITY, minimum=1, maximum=STEPS_MAX)
    gamma: float = setting(0.99, "Discount factor.", IDENTITY, minimum=0.0, maximum=1.0)
    rmsprop_alpha: float = setting(0.99, "RMSProp smoothing constant.", IDENTITY, minimum=0.0, maximum=1.0)
    rmsprop_eps: float = setting(0.01, "RMSProp epsilon.", IDENTITY, minimum=0.0, exclusive_minimum=True)
    rmsprop_momentum: float = setting(0.0, "RMSProp momentum.", IDENTITY, minimum=0.0)
    baseline_cost: float = setting(0.5, "Weight of the value loss.", IDENTITY, minimum=0.0)
    entropy_cost: float = setting(0.01, "Weight of the entropy bonus.", IDENTITY, minimum=0.0)
    rho_clip: float = setting(1.0, "V-trace rho-bar: clip of the importance weights in the value targets.",
                              IDENTITY, minimum=0.0, exclusive_minimum=True)
    pg_rho_clip: float = setting(1.0, "Clip of the importance weights in the policy-gradient advantage.",
                                 IDENTITY, minimum=0.0, exclusive_minimum=True)
    c_clip: float = setting(1.0, "V-trace c-bar: clip of the trace-cutting coefficients.", IDENTITY,
                            minimum=0.0, exclusive_minimum=True)
    max_grad_norm: float = setting(40.0, "Clip the gradient's norm to this (0: no clipping).", IDENTITY,
                                   minimum=0.0)
    hidden_sizes: list[int] = setting([256, 256], "Widths of the MLP torso's hidden layers (vector obs).",
                                      IDENTITY, minimum=1, maximum=COUNT_MAX)
    feature_size: int = setting(512, "Width of the feature head whose outputs elite replay compares.",
                                IDENTITY, minimum=1, maximum=COUNT_MAX)
    serial: bool = setting(False, "Run actors and learner in one process (debugging; bit-exact resume).",
                           RESUME)


@dataclass(frozen=True)
class CheckpointSection:
    """[checkpoint]: when checkpoints are written and how many are kept."""

    every_steps: int = setting(50_000, "Steps between interval checkpoints (0: only pause and final).",
                               LIVE, minimum=0, maximum=STEPS_MAX)
    keep: int = setting(3, "Newest checkpoints kept on disk.", LIVE, minimum=1, maximum=100_000)
    replay: bool = setting(True, "Save replays in checkpoints; without them a resume is not exact.",
                           LIVE)


@dataclass(frozen=True)
class LogSection:
    """[log]: training metrics written to metrics.jsonl."""

    every_steps: int = setting(1000, "Steps between train-metric lines.", LIVE, minimum=1,
                              maximum=STEPS_MAX)
    tensorboard: bool = setting(False, "Also write TensorBoard event files (needs tensorboard).", LIVE)


@dataclass(frozen=True)
class EvalSection:
    """[eval]: greedy evaluation on its own environments and random streams."""

    every_steps: int = setting(0, "Steps between evaluations (0: none).", LIVE, minimum=0,
                              maximum=STEPS_MAX)
    episodes: int = setting(5, "Episodes per evaluation.", LIVE, minimum=1, maximum=1_000_000)
    epsilon: float = setting(0.0, "Exploration rate while evaluating (its own random stream).", LIVE,
                             minimum=0.0, maximum=1.0)


@dataclass(frozen=True)
class JobSpec:
    """A whole job file, every default filled in."""

    job: JobSection = field(default_factory=JobSection)
    env: EnvSection = field(default_factory=EnvSection)
    dqn: DqnSection = field(default_factory=DqnSection)
    vtrace: VtraceSection = field(default_factory=VtraceSection)
    replay: tuple[ReplaySection, ...] = field(default_factory=lambda: (ReplaySection(),))
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    log: LogSection = field(default_factory=LogSection)
    eval: EvalSection = field(default_factory=EvalSection)

    def to_toml(self) -> str:
        """The resolved spec as TOML, each field preceded by its doc line."""
        return render_toml(self)

    @property
    def batch_size(self) -> int:
        """Items per learner batch: transitions for dqn, unrolls for vtrace."""
        return self.vtrace.batch_size if self.job.algo == "vtrace" else self.dqn.batch_size

    def sha256(self) -> str:
        return hashlib.sha256(self.to_toml().encode()).hexdigest()

    def replace(self, section: str, **changes: Any) -> "JobSpec":
        """A copy with fields of one table changed (tests and tools use this)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


TABLES: dict[str, type] = {f.name: f.default_factory().__class__ for f in dataclasses.fields(JobSpec)
                           if f.name != "replay"}
ARRAY_TABLES: dict[str, type] = {"replay": ReplaySection}


# ---------------------------------------------------------------------------------------------
# Errors


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a job file, located as precisely as the file allows."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class SpecError(ValueError):
    """A job file that cannot be used; str() lists every problem as FILE:LINE: field: message."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(problem) for problem in problems))


# ---------------------------------------------------------------------------------------------
# Locating keys: tomllib gives values, not positions, so a light scan maps keys to lines.

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _split_dotted(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in re.split(r"\.(?=(?:[^\"']|\"[^\"]*\"|'[^']*')*$)", text)]


def locate_keys(text: str) -> dict[tuple, int]:
    """Map key paths such as ("dqn", "lr") or ("replay", 0, "ratio") to 1-based line numbers."""
    lines: dict[tuple, int] = {}
    table: tuple = ()
    array_counts: dict[tuple, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            path = tuple(_split_dotted(header.group(2)))
            if header.group(1) == "[[":
                index = array_counts.get(path, -1) + 1
                array_counts[path] = index
                table = path + (index,)
            else:
                table = path
            lines.setdefault(table, number)
            continue
        key = _KEY.match(line)
        if key:
            lines.setdefault(table + tuple(_split_dotted(key.group(1))), number)
    return lines


class _Located:
    """Resolves the line of a key path, falling back to its enclosing table."""

    def __init__(self, file: str, text: str):
        self.file = file
        self.lines = locate_keys(text)

    def line(self, path: tuple) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def problem(self, path: tuple, message: str) -> Problem:
        return Problem(self.file, self.line(path), _dotted(path), message)


def _dotted(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


# ---------------------------------------------------------------------------------------------
# Loading


def load(path: str | Path) -> JobSpec:
    """Read and validate a job file; raise SpecError naming file, line and field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError([Problem(str(path), None, "", f"cannot read the file: {error}")]) from None
    return loads(text, file=str(path), default_name=path.stem)


def loads(text: str, *, file: str = "<string>", default_name: str = "job") -> JobSpec:
    """Parse job-file text; see load()."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_from_message(str(error))
        if line is None and "end of document" in str(error):
            line = max(len(text.splitlines()), 1)
        message = getattr(error, "msg", None) or re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))
        raise SpecError([Problem(file, line, "", f"invalid TOML: {message}")]) from None
    located = _Located(file, text)
    problems: list[Problem] = []
    spec = _build_spec(data, located, problems)
    if spec is not None:
        if not spec.job.name:
            spec = spec.replace("job", name=sanitize_name(default_name))
        problems.extend(_cross_checks(spec, located))
    if problems:
        raise SpecError(problems)
    return spec


def _line_from_message(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


def _build_spec(data: dict, located: _Located, problems: list[Problem]) -> JobSpec | None:
    sections: dict[str, Any] = {}
    known = list(TABLES) + list(ARRAY_TABLES)
    for key, value in data.items():
        if key in TABLES:
            if not isinstance(value, dict):
                problems.append(located.problem((key,), f"must be a table [{key}]"))
                continue
            sections[key] = _build_section(TABLES[key], value, (key,), located, problems)
        elif key in ARRAY_TABLES:
            if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
                problems.append(located.problem((key,), f"must be an array of tables [[{key}]]"))
                continue
            if not value:
                problems.append(located.problem((key,), "needs at least one entry"))
                continue
            sections[key] = tuple(_build_section(ARRAY_TABLES[key], item, (key, index), located, problems)
                                  for index, item in enumerate(value))
        else:
            problems.append(located.problem((key,), "unknown table" + _suggestion(key, known)))
    if problems:
        return None
    return JobSpec(**sections)


def _build_section(cls: type, data: dict, path: tuple, located: _Located, problems: list[Problem]):
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in hints:
            problems.append(located.problem(path + (key,), "unknown field" + _suggestion(key, list(hints))))
            continue
        error = check_value(value, hints[key], _field(cls, key).metadata)
        if error:
            problems.append(located.problem(path + (key,), error))
        else:
            values[key] = float(value) if hints[key] is float else value
    return cls(**values)


def field_problem(section: str, name: str, value: Any) -> str | None:
    """Why value cannot be [section] name (type and range), or None: for values given outside a file."""
    cls = TABLES[section]
    return check_value(value, typing.get_type_hints(cls)[name], _field(cls, name).metadata)


def _field(cls: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def _suggestion(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _cross_checks(spec: JobSpec, located: _Located) -> list[Problem]:
    """Rules that involve more than one field."""
    problems = []
    if spec.job.algo not in registry.algorithm_names():  # the registry: built-ins and plugins, no torch
        problems.append(located.problem(("job", "algo"), registry.unknown_message(spec.job.algo)))
    total = sum(replay.ratio for replay in spec.replay)
    if abs(total - 1.0) > 1e-9:
        problems.append(located.problem(("replay", 0, "ratio"),
                                        f"replay ratios must sum to 1, they sum to {total:g}"))
    batch = spec.batch_size
    for index, replay in enumerate(spec.replay):
        share = replay.ratio * batch
        if abs(share - round(share)) > 1e-9:
            problems.append(located.problem(
                ("replay", index, "ratio"),
                f"ratio {replay.ratio:g} of batch {batch} is {share:g} items; it must be a whole number"))
        problems.extend(_replay_problems(spec, index, replay, round(share), located))
    if spec.dqn.epsilon_end > spec.dqn.epsilon_start:
        problems.append(located.problem(("dqn", "epsilon_end"), "must not exceed epsilon_start"))
    if spec.env.preset == "atari" and not spec.env.id.startswith("ALE/"):
        problems.append(located.problem(("env", "id"), f"the atari preset needs an ALE/ id, not {spec.env.id!r}"))
    if spec.job.device == "cpu" and spec.job.gpus:
        problems.append(located.problem(("job", "gpus"), "a job with device = \"cpu\" cannot reserve GPUs"))
    return problems


def _replay_problems(spec: JobSpec, index: int, replay: ReplaySection, share: int,
                     located: _Located) -> list[Problem]:
    """What one [[replay]] table cannot do for this job's algorithm and batch."""
    path = ("replay", index)
    problems = []
    if spec.job.algo == "dqn" and replay.kind == "queue":
        problems.append(located.problem(path + ("kind",),
                                        "a queue holds unrolls for vtrace; dqn uses standard, elite or attentive"))
    if spec.job.algo == "dqn" and replay.elite_insertion:
        problems.append(located.problem(path + ("elite_insertion",), "elite insertion is for vtrace unrolls only"))
    if replay.kind == "queue" and replay.capacity < share:
        problems.append(located.problem(path + ("capacity",), f"a queue must hold at least its share of each "
                                                              f"batch ({share} unrolls), not {replay.capacity}"))
    if replay.min_size > replay.capacity:
        problems.append(located.problem(path + ("min_size",),
                                        f"must not exceed capacity ({replay.capacity}), not {replay.min_size}"))
    return problems


# ---------------------------------------------------------------------------------------------
# Diffs between the spec a run has and an edited file


@dataclass(frozen=True)
class Change:
    """One field that differs between two specs."""

    field: str
    old: Any
    new: Any
    edit: str

    def __str__(self) -> str:
        return f"{self.field}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    if isinstance(value, tuple):
        return f"{len(value)} tables"
    return json.dumps(value) if isinstance(value, (str, list)) else repr(value)


def diff(old: JobSpec, new: JobSpec) -> list[Change]:
    """Every field that differs, with its edit class."""
    changes: list[Change] = []
    for section in dataclasses.fields(JobSpec):
        old_value, new_value = getattr(old, section.name), getattr(new, section.name)
        if isinstance(old_value, tuple):
            changes.extend(_diff_tables(section.name, old_value, new_value))
        else:
            changes.extend(_diff_section(section.name, old_value, new_value))
    return changes


def _diff_tables(name: str, old: tuple, new: tuple) -> list[Change]:
    if len(old) != len(new):
        return [Change(name, old, new, IDENTITY)]
    changes = []
    for index, (old_item, new_item) in enumerate(zip(old, new)):
        changes.extend(_diff_section(f"{name}[{index}]", old_item, new_item))
    return changes


def _diff_section(prefix: str, old: Any, new: Any) -> list[Change]:
    return [Change(f"{prefix}.{f.name}", getattr(old, f.name), getattr(new, f.name), f.metadata["edit"])
            for f in dataclasses.fields(old) if getattr(old, f.name) != getattr(new, f.name)]


def refused(changes: list[Change]) -> list[Change]:
    """The identity changes, which no resume may apply."""
    return [change for change in changes if change.edit == IDENTITY]


def refusal_message(changes: list[Change]) -> str:
    lines = [f"  {change}" for change in refused(changes)]
    return ("these fields define what the run learns and cannot change on resume; "
            "start a new run to use them:\n" + "\n".join(lines))


def only_live(changes: list[Change]) -> bool:
    return all(change.edit == LIVE for change in changes)


def merge_live(current: JobSpec, edited: JobSpec) -> JobSpec:
    """current with every live field taken from edited: what a running worker applies on SIGHUP."""
    sections = {}
    for section in dataclasses.fields(JobSpec):
        old, new = getattr(current, section.name), getattr(edited, section.name)
        if isinstance(old, tuple):
            continue  # array tables hold identity fields only
        live = {f.name: getattr(new, f.name) for f in dataclasses.fields(old) if f.metadata["edit"] == LIVE}
        sections[section.name] = dataclasses.replace(old, **live)
    return dataclasses.replace(current, **sections)


def sanitize_name(name: str) -> str:
    """A name safe as a path component: no separators, no dots at the start, no control characters."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-.")
    return cleaned[:64] or "job"


# ---------------------------------------------------------------------------------------------
# Rendering: resolved TOML and JSON Schema, both generated from the dataclasses.


def render_toml(spec: JobSpec) -> str:
    blocks = []
    for section in dataclasses.fields(JobSpec):
        value = getattr(spec, section.name)
        items = value if isinstance(value, tuple) else (value,)
        header = f"[[{section.name}]]" if isinstance(value, tuple) else f"[{section.name}]"
        for item in items:
            lines = [header]
            for f in dataclasses.fields(item):
                lines.append(f"# {f.metadata['doc']} ({f.metadata['edit']})")
                lines.append(f"{f.name} = {_toml_value(getattr(item, f.name))}")
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _toml_value(value: Any) -> str:
    """A value as TOML, by a real TOML writer: json.dumps would escape characters beyond the Basic
    Multilingual Plane as surrogate pairs, which TOML forbids. Lists stay on one line."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    if not isinstance(value, (bool, int, float, str)):
        raise TypeError(f"cannot write {value!r} as TOML")
    return tomli_w.dumps({"value": value}).removeprefix("value = ").rstrip("\n")


def json_schema() -> dict:
    """JSON Schema (draft 2020-12) of job files."""
    properties = {name: _section_schema(cls) for name, cls in TABLES.items()}
    for name, cls in ARRAY_TABLES.items():
        properties[name] = {"type": "array", "minItems": 1, "items": _section_schema(cls),
                            "description": cls.__doc__}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "rlsup job file",
            "type": "object", "additionalProperties": False, "properties": properties}


def _section_schema(cls: type) -> dict:
    hints = typing.get_type_hints(cls)
    properties = {}
    for f in dataclasses.fields(cls):
        schema = _type_schema(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        schema.update(default=default, description=f"{f.metadata['doc']} Edit class: {f.metadata['edit']}.")
        for key, schema_key in (("minimum", "minimum"), ("maximum", "maximum")):
            if f.metadata.get(key) is not None:
                name = "exclusiveMinimum" if key == "minimum" and f.metadata["exclusive_minimum"] else schema_key
                schema[name] = f.metadata[key]
        properties[f.name] = schema
    return {"type": "object", "description": cls.__doc__, "additionalProperties": False,
            "properties": properties}


def _type_schema(annotation: Any) -> dict:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return {"type": "string", "enum": list(typing.get_args(annotation))}
    if origin is list:
        return {"type": "array", "items": _type_schema(typing.get_args(annotation)[0])}
    return {"type": {bool: "boolean", int: "integer", float: "number", str: "string"}[annotation]}
