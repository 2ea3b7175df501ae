"""Where an [env] section's gym stack comes from: its registering imports, gym.make, the Atari preset, its spaces."""
from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import importlib.metadata
import warnings
from dataclasses import dataclass

import ale_py
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.spaces import Box
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from rlsup.algos.envs.actions import ActionSpace, ActionSpaceError, action_space_of
from rlsup.algos.envs.fire_reset import FireReset, needs_fire
from rlsup.algos.envs.minatar_seeding import ReseedInPlace, is_minatar
from rlsup.algos.envs.mujoco_warnings import route_mujoco_warnings
from rlsup.algos.envs.render_imports import defer_render_imports
from rlsup.algos.envs.observations import NetworkError, ObservationLayout, layout_of
from rlsup.formatting import Sentence, one_line
from rlsup.spec import EnvSection

# gymnasium calls every id that has a newer version "out of date". MinAtar's -v0 ids are not stale: they have
# all 6 actions, as the MinAtar paper's agents had (v1 is each game's minimal set), and rlsup's MinAtar job
# files choose them on purpose, so their users are not told to "upgrade". Other ids keep the warning.
warnings.filterwarnings("ignore", message=r".*The environment MinAtar/\w+-v0 is out of date",
                        category=DeprecationWarning)

gym.register_envs(ale_py)
# The ALE's banner would land on the stderr of `rlsup validate` and `rlsup submit`, which make the env once.
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)

ATARI_SCREEN_SIZE = 84
ATARI_ENTRY_POINT = "ale_py.env:AtariEnv"
# The entry-point group through which packages such as MinAtar offer to register a namespace of ids;
# Gymnasium 1.x no longer loads it by itself.
PLUGIN_GROUP = "gymnasium.envs"
# Namespaces an rlsup extra installs: what to tell a user whose id names one that is missing.
NAMESPACE_EXTRAS = {"MinAtar": "minatar"}
# Gymnasium's own envs that need an optional dependency: entry-point module prefix -> rlsup extra.
GYMNASIUM_EXTRAS = {"gymnasium.envs.box2d": "box2d", "gymnasium.envs.mujoco": "mujoco"}


class EnvError(Sentence, ValueError):
    """An env id that cannot be made, does not fit its preset, or whose state cannot be captured."""


class EnvImportError(EnvError):
    """A module named in [env] imports that does not import."""


@dataclass(frozen=True)
class EnvDescription:
    """What the learner needs to know of an env before making one per actor: its observations and actions."""

    observation: ObservationLayout
    actions: ActionSpace

    @property
    def num_actions(self) -> int:
        """Discrete(n)'s n, or the length of a continuous action vector."""
        return self.actions.count


def make_stack(env: EnvSection, render_mode: str | None = None) -> gym.Env:
    """The gym stack an [env] section describes, its spaces checked; the Atari preset adds DeepMind's chain."""
    spec = registered_spec(env)
    _check_preset(env, spec)
    route_mujoco_warnings(spec.entry_point)
    try:
        stack = _make_atari(env, render_mode) if env.preset == "atari" else _make_as_registered(env, render_mode)
    except gym.error.DependencyNotInstalled as error:
        raise EnvError(f"cannot make env {env.id!r}: {error}{_extra_advice(spec)}") from None
    except gym.error.Error as error:
        raise EnvError(f"cannot make env {env.id!r}: {error}") from error
    except Exception as error:  # a user's env may fail in any way; its own words are what helps
        raise EnvError(f"cannot make env {env.id!r}: {type(error).__name__}: {_first_words(error)}") from error
    route_mujoco_warnings(spec.entry_point)  # a user's env that runs on MuJoCo has imported it by now
    try:
        _check_spaces(env, stack)
    except EnvError:
        stack.close()
        raise
    return stack


def describe_env(env: EnvSection) -> EnvDescription:
    """Observation layout and actions, from one env made and closed at once: once per process for
    each [env] section, so that `rlsup run`'s check and its worker's sizing of replays and networks share it."""
    return _describe(env_key(env))


@functools.lru_cache(maxsize=16)
def _describe(frozen: tuple) -> EnvDescription:
    env = env_of_key(frozen)
    stack = make_stack(env)
    try:
        return EnvDescription(observation_layout(stack, env), action_space_of(env.id, stack.action_space))
    finally:
        stack.close()


def env_key(env: EnvSection) -> tuple:
    """The section as a cache key ([env] imports is a list, which a key cannot hold)."""
    return tuple((name, tuple(value) if isinstance(value, list) else value)
                 for name, value in dataclasses.asdict(env).items())


def env_of_key(frozen: tuple) -> EnvSection:
    """The section env_key made the key of."""
    return EnvSection(**{name: list(value) if isinstance(value, tuple) else value for name, value in frozen})


def observation_layout(stack: gym.Env, env: EnvSection) -> ObservationLayout:
    space = stack.observation_space
    return layout_of(space.shape, space.dtype, stacked=env.preset == "atari", image_layout=env.image_layout)


def registered_spec(env: EnvSection) -> gym.envs.registration.EnvSpec:
    """The registry's entry for env.id, after the imports that register it: [env] imports, the plugin of its
    namespace (MinAtar/), and the module of a "module:Env-v0" id."""
    import_env_modules(env)
    module, _, name = env.id.rpartition(":")
    if module:
        _import(module, f"the env id {env.id!r} names it")
    if name not in gym.registry:
        raise EnvError(f"unknown env id {env.id!r}{_closest_id(name)}")
    return gym.spec(name)


def _closest_id(name: str) -> str:
    close = difflib.get_close_matches(name, list(gym.registry), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return " (see gymnasium.pprint_registry(); for an env your own package registers, name it in [env] imports)"


def import_env_modules(env: EnvSection) -> None:
    """Import what registers env.id: the modules [env] imports names, then its namespace's plugin."""
    for module in env.imports:
        _import(module, "[env] imports names it", EnvImportError)
    namespace, slash, _ = env.id.rpartition(":")[2].partition("/")
    if slash and env.id not in gym.registry:
        _register_namespace(env.id, namespace)


def _register_namespace(env_id: str, namespace: str) -> None:
    """Run the registering function an installed package declares for this namespace (MinAtar's register_envs)."""
    plugins = [entry for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP) if entry.name == namespace]
    if not plugins and namespace in NAMESPACE_EXTRAS:
        raise EnvError(f"env id {env_id!r} needs the package that registers {namespace}/ ids, which is not "
                       f"installed: pip install 'rlsup[{NAMESPACE_EXTRAS[namespace]}]'")
    defer_render_imports(namespace)
    for plugin in plugins:
        try:
            registering = plugin.load()
            if callable(registering):
                registering()
        except Exception as error:  # a third-party package may fail in any way; its message is what helps
            raise EnvError(f"cannot register the {namespace}/ ids with {plugin.value}: "
                           f"{type(error).__name__}: {error}") from None


def _import(module: str, why: str, error_class: type[EnvError] = EnvError) -> None:
    import_or_explain(module, f"cannot import {module!r} ({why})", error_class)


def import_or_explain(module: str, failure: str, error_class: type[EnvError] = EnvError) -> None:
    """Import a module a job names, or raise error_class("failure: the error's own words"); an EnvError the module
    raises itself is already a sentence, and passes as it is."""
    try:
        importlib.import_module(module)
    except EnvError:
        raise
    except Exception as error:  # a user's module may fail in any way; its message is what helps
        raise error_class(f"{failure}: {type(error).__name__}: {one_line(str(error))}") from None


def _extra_advice(spec: gym.envs.registration.EnvSpec) -> str:
    entry_point = spec.entry_point if isinstance(spec.entry_point, str) else ""
    extras = [extra for prefix, extra in GYMNASIUM_EXTRAS.items() if entry_point.startswith(prefix)]
    return f"; install it with: pip install 'rlsup[{extras[0]}]'" if extras else ""


def _check_preset(env: EnvSection, spec: gym.envs.registration.EnvSpec) -> None:
    is_atari = spec.entry_point in (ATARI_ENTRY_POINT, AtariEnv)
    if env.preset == "atari" and not is_atari:
        raise EnvError(f"env id {env.id!r} is not an Atari (ALE) game, so preset \"atari\" does not fit it; "
                       f"use preset = \"classic\"")
    if env.preset == "classic" and is_atari:
        raise EnvError(f"env id {env.id!r} is an Atari game: use preset = \"atari\"")


def _make_as_registered(env: EnvSection, render_mode: str | None) -> gym.Env:
    options = _render_option(render_mode)
    if env.max_episode_steps > 0:
        options["max_episode_steps"] = env.max_episode_steps
    # The passive checker only warns, yet it keeps check-once flags and the previous step's data,
    # state that would have to be captured too.
    stack = gym.make(env.id, disable_env_checker=True, **options)
    return ReseedInPlace(stack) if is_minatar(stack) else stack


def _make_atari(env: EnvSection, render_mode: str | None) -> gym.Env:
    # ALE counts the limit in emulator frames, reset no-ops included, as the 108,000-frame convention does.
    options = _render_option(render_mode)
    if env.max_episode_steps > 0:
        options["max_num_frames_per_episode"] = env.max_episode_steps * env.frame_skip
    # AtariPreprocessing reads the screen from ALE itself and drops the game's own per-frame observation,
    # so ask for the cheapest screen copy that keeps its buffers' (210, 160) shape: ~10% faster than RGB.
    game = gym.make(env.id, frameskip=1, repeat_action_probability=env.sticky_actions,
                    full_action_space=False, obs_type="grayscale", disable_env_checker=True, **options)
    # The game's own observation is then never read, yet AtariEnv copies it out on every emulator frame: with
    # the spaces set, have it copy its 128 bytes of RAM instead of a 210x160 screen (a Pong agent step's CPU
    # went from 350 to 310 us, the trajectory unchanged; ale-py has no public switch for it).
    game.unwrapped._obs_type = "ram"
    # Life loss is handled by TrainingEnv so that it ends the episode for learning only.
    preprocessed = AtariPreprocessing(game, noop_max=env.noop_max, frame_skip=env.frame_skip,
                                      screen_size=ATARI_SCREEN_SIZE, grayscale_obs=True, scale_obs=False,
                                      terminal_on_life_loss=False)
    if env.fire_reset and needs_fire(game):
        preprocessed = FireReset(preprocessed)
    # "reset" padding: the replay rebuilds stacks after a reset by repeating the reset frame.
    return FrameStackObservation(preprocessed, env.frame_stack, padding_type="reset")


def _first_words(error: Exception) -> str:
    """The error's own message, on one line: gymnasium appends, after " was raised from the environment
    creator", the whole keyword dict, which says nothing the job file does not."""
    return one_line(str(error).split(" was raised from the environment creator")[0])


def _render_option(render_mode: str | None) -> dict:
    # gym.make hands render_mode to the env's constructor even when None, which some envs do not take.
    return {} if render_mode is None else {"render_mode": render_mode}


def _check_spaces(env: EnvSection, stack: gym.Env) -> None:
    """Discrete actions from 0 or a Box vector with finite bounds (actions.py), and a Box observation of a vector
    or an image; the message names the space."""
    try:
        action_space_of(env.id, stack.action_space)
    except ActionSpaceError as error:
        raise EnvError(str(error)) from None
    observations = stack.observation_space
    if not isinstance(observations, Box):
        raise EnvError(f"env id {env.id!r} has the observation space {observations}; rlsup trains on a Box "
                       f"(a vector, or an image in HWC or CHW layout), not a {type(observations).__name__}")
    if not (np.issubdtype(observations.dtype, np.number) or observations.dtype == np.bool_):
        raise EnvError(f"env id {env.id!r} has the observation space {observations}, whose dtype "
                       f"{observations.dtype} is neither bool nor a number")
    try:
        observation_layout(stack, env)
    except NetworkError as error:
        raise EnvError(f"env id {env.id!r} has the observation space {observations}: {error}") from None
