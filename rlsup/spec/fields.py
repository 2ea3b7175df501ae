"""Job-file fields: frozen dataclasses whose fields carry their default, doc, edit class and range."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from rlsup.spec.values import CAPACITY_MAX, COUNT_MAX, INT64_MAX, STEPS_MAX, WALL_SECONDS_MAX

# Edit classes (DESIGN.md section 5).
LIVE = "live"          # applied to a running worker by SIGHUP
RESUME = "resume"      # applied by pause -> resume
IDENTITY = "identity"  # refused: it would change what the run learns
EDIT_CLASSES = (LIVE, RESUME, IDENTITY)

Network = Literal["auto", "mlp", "nature_cnn", "small_cnn"]
NETWORK_DOC = ("Network torso; auto follows the observation (mlp for vectors, nature_cnn for images of 36 pixels "
               "a side and more, small_cnn, MinAtar's, below) and the run's job.toml records the choice.")
Activation = Literal["relu", "silu"]
ACTIVATION_DOC = ("The torso's units: relu; or silu, SiLU and dSiLU on the last hidden layer (Elfwing et al. 2018), "
                  "the MinAtar paper's actor-critic's.")


def setting(default: Any, doc: str, edit: str, *, minimum: float | None = None,
            maximum: float | None = None, exclusive_minimum: bool = False, env_state: bool = False,
            formerly: str | None = None, resolved: bool = False) -> Any:
    """Declare a spec field: its default, one line of documentation and its edit class.

    env_state: the field changes what a captured environment state means, so a state saved under
    another value cannot be restored. formerly: an old spelling job files may still use (with a
    deprecation warning). resolved: the default "auto" is replaced by what it stands for when the run is
    made, so its job.toml records the choice; a job file that still says "auto" matches it.
    """
    assert edit in EDIT_CLASSES, edit
    metadata = {"doc": doc, "edit": edit, "minimum": minimum, "maximum": maximum,
                "exclusive_minimum": exclusive_minimum, "env_state": env_state, "formerly": formerly,
                "resolved": resolved}
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
    gpu_memory_gb: float = setting(0.0, "GPU memory in GiB the job needs on each of its GPUs, for packing jobs onto "
                                        "shared GPUs (0: undeclared; the daemon then goes by what the worker "
                                        "reports, and gives it a whole GPU until its first report).", RESUME,
                                   minimum=0, maximum=1_000_000)
    threads: int = setting(1, "Torch CPU threads of the worker; results are bit-exact for a fixed count.",
                           RESUME, minimum=1, maximum=4096)
    flush_denormals: bool = setting(
        False, "Subnormal floats (below 1.2e-38) read and written as zero by the CPU (x86-64's FTZ and DAZ): faster "
               "where Adam's moments decay into them (MinAtar DQN; see the algorithms guide), and another run, if one "
               "that has kept the same networks as far as measured.",
        IDENTITY)
    priority: int = setting(0, "Higher runs first; ties go by submission order.", LIVE, minimum=-(2 ** 31),
                            maximum=2 ** 31 - 1)
    max_restarts: int = setting(3, "Restarts from the latest checkpoint after a crash.", LIVE, minimum=0,
                           maximum=10_000)
    stop_grace_s: float = setting(60.0, "Seconds a pausing worker gets before SIGKILL.", LIVE, minimum=0)
    # Counted like total_steps, over the run's whole trajectory: a resume does not restart the clock.
    max_wall_s: float = setting(0.0, "Seconds of training the run may take in all, summed over its resumes as its "
                                     "checkpoints record them (0: no limit); used up, the worker pauses with a "
                                     "checkpoint, and raising it lets a resume train on.", LIVE, minimum=0,
                                maximum=WALL_SECONDS_MAX)
    cluster: str = setting("", "Where the job runs: a [[cluster]] name of daemon.toml, or \"\" for this machine.",
                           RESUME)


@dataclass(frozen=True)
class EnvSection:
    """[env]: the environment and its preprocessing."""

    id: str = setting("CartPole-v1", "Gymnasium id: CartPole-v1, ALE/Pong-v5, LunarLander-v3, MinAtar/Breakout-v1, "
                                      "an id the imports register, or module:Env-v0.", IDENTITY, env_state=True)
    source: Literal["gymnasium", "fused"] = setting(
        "gymnasium", "Where the games come from: gymnasium (env objects, stepped on CPU cores by the vectoriser) or "
                     "fused (a batch of games whose state is tensors on the learner's device, stepped at once, "
                     "MinAtar's through JAX or a plugin's; V-trace steps [vtrace] batch_size of them in its one "
                     "process, DQN num_envs of them on the CPU).", IDENTITY)
    imports: list[str] = setting([], "Python modules the worker imports before making the env, e.g. a package "
                                     "of yours that registers it (found on PYTHONPATH).", IDENTITY)
    preset: Literal["classic", "atari"] = setting(
        "classic", "classic: any non-ALE env as registered (vector or image observations); atari: an ALE game "
                   "with DeepMind preprocessing.", IDENTITY, env_state=True)
    image_layout: Literal["auto", "hwc", "chw"] = setting(
        "auto", "Axis order of image observations; auto: channels first when the first side is the smaller of "
                "the first and the last, as (4, 84, 84), else last, as MinAtar's (10, 10, 4).", IDENTITY)
    num_envs: int = setting(1, "Environments stepped side by side by the worker.", IDENTITY, minimum=1,
                           maximum=COUNT_MAX)
    vectoriser: Literal["auto", "serial", "subprocess"] = setting(
        "auto", "How the envs of a vector are stepped: serial (in turn, in the worker), subprocess (slices of "
                "them in processes of their own, at once), auto (subprocess for an ALE game with 2+ envs a CPU "
                "on 2+ idle CPUs, else serial; see the environments guide). Same trajectory with each.",
        RESUME)
    sticky_actions: float = setting(0.0, "Atari repeat_action_probability (0.25 for sticky actions).",
                                    IDENTITY, minimum=0.0, maximum=1.0, env_state=True)
    clip_rewards: bool = setting(False, "Clip learning rewards to their sign (game scores stay raw).",
                                 IDENTITY, env_state=True)
    episodic_life: bool = setting(False, "A lost life ends the episode for learning, not the game.",
                                  IDENTITY, env_state=True)
    noop_max: int = setting(30, "Atari: at most this many no-ops after a reset.", IDENTITY, minimum=0,
                           maximum=100_000, env_state=True)
    frame_skip: int = setting(4, "Atari: frames each action is repeated for.", IDENTITY, minimum=1,
                             maximum=1000, env_state=True)
    frame_stack: int = setting(4, "Atari: frames stacked into one observation.", IDENTITY, minimum=1,
                              maximum=1000, env_state=True)
    max_episode_steps: int = setting(0, "Truncate episodes after this many steps (0: env default).",
                                     IDENTITY, minimum=0, maximum=STEPS_MAX, env_state=True)
    fire_reset: bool = setting(True, "Atari: press FIRE after a reset and after a lost life, in games whose "
                                     "actions include FIRE (FireResetEnv of CleanRL and stable-baselines3).",
                               IDENTITY, env_state=True)


def learning_rate_end() -> Any:
    """[dqn] and [vtrace] lr_end: the same field in both learners' sections."""
    return setting(0.0, "Learning rate reached at lr_end_step, and kept after it.", IDENTITY, minimum=0.0)


def rmsprop_alpha(default: float) -> Any:
    """[dqn] and [vtrace] rmsprop_alpha."""
    return setting(default, "RMSProp smoothing constant.", IDENTITY, minimum=0.0, maximum=1.0)


def rmsprop_eps(default: float) -> Any:
    """[dqn] and [vtrace] rmsprop_eps."""
    return setting(default, "RMSProp epsilon.", IDENTITY, minimum=0.0, exclusive_minimum=True)


def discount_factor() -> Any:
    """[dqn] and [vtrace] gamma."""
    return setting(0.99, "Discount factor.", IDENTITY, minimum=0.0, maximum=1.0)


@dataclass(frozen=True)
class DqnSection:
    """[dqn]: Deep Q-learning (double, n-step)."""

    lr: float = setting(1e-4, "Learning rate at step 0.", IDENTITY, minimum=0.0, exclusive_minimum=True)
    lr_end: float = learning_rate_end()
    lr_end_step: int = setting(0, "Absolute step at which the learning rate has moved linearly from lr to "
                                  "lr_end (0: lr throughout).", IDENTITY, minimum=0, maximum=STEPS_MAX)
    gamma: float = discount_factor()
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
    network: Network = setting("auto", NETWORK_DOC, IDENTITY, resolved=True)
    activation: Activation = setting("relu", ACTIVATION_DOC, IDENTITY)
    loss: Literal["huber", "mse"] = setting("huber", "Temporal-difference loss.", IDENTITY)
    optimizer: Literal["adam", "rmsprop"] = setting("adam", "adam (eps 1e-8); or rmsprop with rmsprop_alpha, "
                                                    "rmsprop_eps and rmsprop_centered, the DQN papers' choice.",
                                                    IDENTITY)
    rmsprop_alpha: float = rmsprop_alpha(0.95)
    rmsprop_eps: float = rmsprop_eps(0.01)
    rmsprop_centered: bool = setting(True, "RMSProp divides by the gradient's running standard deviation rather "
                                           "than its root mean square (the MinAtar paper's DQN).", IDENTITY)
    max_grad_norm: float = setting(10.0, "Clip the gradient's norm to this (0: no clipping).", IDENTITY,
                                   minimum=0.0)
    epsilon_start: float = setting(1.0, "Exploration rate at step 0.", IDENTITY, minimum=0.0, maximum=1.0)
    epsilon_end: float = setting(0.01, "Exploration rate from epsilon_end_step on.", IDENTITY,
                                 minimum=0.0, maximum=1.0)
    epsilon_end_step: int = setting(1_000_000, "Absolute step at which epsilon reaches epsilon_end.",
                                    IDENTITY, minimum=1, maximum=STEPS_MAX)
    overlap: bool = setting(False, "Run each round of gradient steps beside the env steps (in a process of its "
                                   "own on the CPU, on a thread on a GPU), acting with the network as it was "
                                   "before the round (a one-round policy lag).",
                            IDENTITY)


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
    alpha_annealing_factor: float = setting(2.0, "Stretches lambda's horizon: lambda reaches 1 at environment step "
                                                 "anneal_steps * alpha.", IDENTITY, minimum=0.0,
                                            exclusive_minimum=True, formerly="alfa_annealing_factor")
    anneal_steps: int = setting(1_000_000, "Environment steps (the unit of total_steps) over which lambda falls "
                                           "linearly to 1, times alpha.", IDENTITY, minimum=1, maximum=STEPS_MAX)
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
    lr_end: float = learning_rate_end()
    lr_end_step: int = setting(50_000_000, "Absolute step at which the learning rate has moved linearly from lr "
                                           "to lr_end.", IDENTITY, minimum=1, maximum=STEPS_MAX)
    gamma: float = discount_factor()
    rmsprop_alpha: float = rmsprop_alpha(0.99)
    rmsprop_eps: float = rmsprop_eps(0.01)
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
    network: Network = setting("auto", NETWORK_DOC, IDENTITY, resolved=True)
    activation: Activation = setting("relu", ACTIVATION_DOC, IDENTITY)
    feature_size: int = setting(512, "Width of the feature head whose outputs elite replay compares.",
                                IDENTITY, minimum=1, maximum=COUNT_MAX)
    serial: bool = setting(False, "Run actors and learner in one process (debugging; bit-exact resume).",
                           RESUME)
    log_std_init: float = setting(0.0, "Continuous actions: the Gaussian policy's initial log standard deviation, "
                                       "in units of half the action bounds' range.", IDENTITY, minimum=-20.0,
                                  maximum=2.0)
    squash: Literal["clip", "tanh"] = setting("clip", "Continuous actions: how a Gaussian sample becomes an action "
                                                      "within the bounds: clipped to them, or squashed by tanh.",
                                              IDENTITY)
    normalize_rewards: bool = setting(False, "Divide learning rewards by the running standard deviation of the "
                                             "discounted return (each actor's, saved in serial runs' checkpoints).",
                                      IDENTITY)
    normalize_observations: bool = setting(False, "Standardise vector observations by their running mean and "
                                                  "standard deviation, inside the network (saved and exported with it).",
                                           IDENTITY)


@dataclass(frozen=True)
class SacSection:
    """[sac]: soft actor-critic for continuous actions (twin Q, target by Polyak averaging, tuned temperature)."""

    lr_actor: float = setting(3e-4, "Adam learning rate of the policy.", IDENTITY, minimum=0.0,
                              exclusive_minimum=True)
    lr_critic: float = setting(1e-3, "Adam learning rate of the twin Q-networks.", IDENTITY, minimum=0.0,
                               exclusive_minimum=True)
    lr_temperature: float = setting(1e-3, "Adam learning rate of the entropy temperature's logarithm.", IDENTITY,
                                    minimum=0.0, exclusive_minimum=True)
    gamma: float = discount_factor()
    batch_size: int = setting(256, "Transitions per gradient step.", IDENTITY, minimum=1, maximum=COUNT_MAX)
    learning_starts: int = setting(5000, "Steps of uniformly random actions before the first gradient step.",
                                   IDENTITY, minimum=0, maximum=STEPS_MAX)
    train_every: int = setting(1, "Environment steps between rounds of gradient steps.", IDENTITY, minimum=1,
                               maximum=STEPS_MAX)
    gradient_steps: int = setting(1, "Gradient steps per round.", IDENTITY, minimum=1, maximum=COUNT_MAX)
    policy_every: int = setting(2, "Critic steps between policy updates; each update then takes that many policy "
                                   "steps (delayed, as TD3 and CleanRL's SAC).", IDENTITY, minimum=1,
                                maximum=COUNT_MAX)
    tau: float = setting(0.005, "Polyak weight of each target-network update.", IDENTITY, minimum=0.0, maximum=1.0,
                         exclusive_minimum=True)
    n_step: int = setting(1, "Steps of reward summed into each target.", IDENTITY, minimum=1, maximum=100_000)
    temperature: float = setting(0.2, "Entropy temperature (alpha) at step 0, kept when autotune is off.",
                                 IDENTITY, minimum=0.0, exclusive_minimum=True)
    autotune: bool = setting(True, "Tune the temperature so the policy's entropy nears the target entropy.",
                             IDENTITY)
    target_entropy_scale: float = setting(1.0, "Target entropy = -scale x the action vector's length.", IDENTITY)
    hidden_sizes: list[int] = setting([256, 256], "Widths of the policy's and each Q-network's hidden layers.",
                                      IDENTITY, minimum=1, maximum=COUNT_MAX)
    network: Network = setting("auto", NETWORK_DOC, IDENTITY, resolved=True)
    activation: Activation = setting("relu", ACTIVATION_DOC, IDENTITY)
    max_grad_norm: float = setting(0.0, "Clip each network's gradient norm to this (0: no clipping).", IDENTITY,
                                   minimum=0.0)


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
    sac: SacSection = field(default_factory=SacSection)
    replay: tuple[ReplaySection, ...] = field(default_factory=lambda: (ReplaySection(),))
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    log: LogSection = field(default_factory=LogSection)
    eval: EvalSection = field(default_factory=EvalSection)

    def to_toml(self) -> str:
        """The resolved spec as TOML, each field preceded by its doc line."""
        from rlsup.spec.render import render_toml  # render reads these classes: imported when used

        return render_toml(self)

    @property
    def batch_size(self) -> int:
        """Items per learner batch: transitions for dqn and sac, unrolls for vtrace (a plugin's: dqn's)."""
        return {"vtrace": self.vtrace, "sac": self.sac}.get(self.job.algo, self.dqn).batch_size

    def sha256(self) -> str:
        return hashlib.sha256(self.to_toml().encode()).hexdigest()

    def replace(self, section: str, **changes: Any) -> "JobSpec":
        """A copy with fields of one table changed (tests and tools use this)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


def default_replays(spec: JobSpec) -> tuple[ReplaySection, ...]:
    """[[replay]] for a job file that has none: for dqn, a uniform replay of 100,000 transitions; for vtrace, plain
    on-policy IMPALA, a queue of one batch whose unrolls are each used once. A uniform replay of 100,000 unrolls
    would learn from stale unrolls, and wait for 20,000 of them (400,000 actor steps) before its first update."""
    if spec.job.algo == "vtrace":
        return (ReplaySection(kind="queue", capacity=spec.vtrace.batch_size),)
    return (ReplaySection(),)


TABLES: dict[str, type] = {f.name: f.default_factory().__class__ for f in dataclasses.fields(JobSpec)
                           if f.name != "replay"}
ARRAY_TABLES: dict[str, type] = {"replay": ReplaySection}


def env_state_fields() -> tuple[str, ...]:
    """[env] fields that change what a captured environment state means (setting's env_state flag)."""
    return tuple(f.name for f in dataclasses.fields(EnvSection) if f.metadata["env_state"])


@functools.cache
def field_types(cls: type) -> dict[str, type]:
    """typing.get_type_hints(cls), evaluated once per class: it compiles every annotation on each call (a
    sweep of 3,000 values took 3.4 s to check, nearly all of it here)."""
    return typing.get_type_hints(cls)


def section_field(cls: type, name: str) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def dotted_names(of_type: type | None = None) -> list[str]:
    """Every table's field as a [sweep] or perturb key names it ("dqn.lr"), or only those of one type."""
    return [f"{section}.{name}" for section, cls in TABLES.items() for name, hint in field_types(cls).items()
            if of_type is None or hint is of_type]


def former_names(cls: type) -> dict[str, str]:
    """Old spelling -> field name, for the fields of cls declared with `formerly`."""
    return {f.metadata["formerly"]: f.name for f in dataclasses.fields(cls) if f.metadata["formerly"]}
