"""Training environments whose whole state is captured mid-episode and restored bit for bit."""
from __future__ import annotations

import dataclasses
import functools
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import ale_py
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.envs.classic_control import AcrobotEnv, CartPoleEnv, MountainCarEnv
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, OrderEnforcing, TimeLimit

from rlsup.algos.env_sources import EnvError, describe_env, make_stack, observation_layout
from rlsup.algos.fire_reset import FireReset
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.spec import EnvSection, env_state_fields

STATE_FORMAT = 1
# Settings that change what a captured state means (declared with env_state=True in the spec).
STATE_SETTINGS = env_state_fields()

__all__ = ["EnvError", "EnvStep", "EpisodeResult", "TrainingEnv", "make_env", "probe_env"]


@dataclass(frozen=True)
class EpisodeResult:
    """A finished game: its unclipped score over every life and its length in agent steps."""

    raw_return: float
    length: int


@dataclass(frozen=True)
class EnvStep:
    """What one agent step returns."""

    observation: np.ndarray        # next observation; for Atari the (stack, 84, 84) uint8 stack
    reward: float                  # learning reward: sign-clipped when clip_rewards
    raw_reward: float              # the game's own reward
    terminal: bool                 # cut the bootstrap: game over, or a lost life when episodic_life
    done: bool                     # the episode is over (terminated or truncated): call reset()
    truncated: bool                # cut by a time limit, not by the game
    episode: EpisodeResult | None  # set when done


def make_env(env: EnvSection, *, seed: int, render_mode: str | None = None) -> TrainingEnv:
    """The env an [env] section describes; its first reset is seeded with seed."""
    return TrainingEnv(make_stack(env, render_mode), env, seed, render_mode)


def probe_env(env: EnvSection) -> tuple[tuple, np.dtype, int, int]:
    """Observation shape, observation dtype, number of actions and stack size, for building networks."""
    return _probe(_hashable(env))


@functools.lru_cache(maxsize=16)
def _probe(frozen: tuple) -> tuple[tuple, np.dtype, int, int]:
    description = describe_env(EnvSection(**{name: list(value) if isinstance(value, tuple) else value
                                             for name, value in frozen}))
    layout = description.observation
    return layout.shape, layout.dtype, description.num_actions, layout.stack_size


def _hashable(env: EnvSection) -> tuple:
    # [env] imports is a list, which a cache key cannot hold.
    return tuple((name, tuple(value) if isinstance(value, list) else value)
                 for name, value in dataclasses.asdict(env).items())


class TrainingEnv:
    """One environment as the learner sees it: clipped rewards, life-loss terminals, capturable state."""

    def __init__(self, stack: gym.Env, env: EnvSection, seed: int, render_mode: str | None) -> None:
        self._stack = stack
        self._settings = env
        self._is_atari = env.preset == "atari"
        self._render_mode = render_mode
        self._pending_seed: int | None = int(seed)  # consumed by the first reset
        self._needs_reset = True
        self._raw_return = 0.0
        self._length = 0
        self._lives = 0
        # Every observation leaves in one layout: (stack, 84, 84) for Atari, float32 vectors, CHW images.
        self._layout = observation_layout(stack, env)
        self.observation_shape: tuple = self._layout.shape
        self.observation_dtype = self._layout.dtype
        self.stack_size = self._layout.stack_size
        self.frame_shape: tuple = self._layout.frame_shape
        self.num_actions = int(stack.action_space.n)

    def reset(self) -> np.ndarray:
        """Start a new episode; only the first reset is seeded, later ones continue the env's RNG."""
        seed, self._pending_seed = self._pending_seed, None
        observation, _ = self._stack.reset(seed=seed)
        self._needs_reset = False
        self._raw_return, self._length = 0.0, 0
        self._lives = self._game_lives()
        return self._observation(observation)

    def step(self, action: int) -> EnvStep:
        """One agent step (frame_skip emulator frames for Atari)."""
        if self._needs_reset:
            raise RuntimeError(f"{self._settings.id}: call reset() first (the episode is over or never began)")
        observation, raw_reward, terminated, truncated, _ = self._stack.step(int(action))
        raw_reward = float(raw_reward)
        self._raw_return += raw_reward
        self._length += 1
        lives = self._game_lives()
        life_lost, self._lives = lives < self._lives, lives
        done = bool(terminated or truncated)
        episode = None
        if done:
            self._needs_reset = True
            episode = EpisodeResult(raw_return=self._raw_return, length=self._length)
        reward = float(np.sign(raw_reward)) if self._settings.clip_rewards else raw_reward
        terminal = bool(terminated) or (self._settings.episodic_life and life_lost)
        return EnvStep(observation=self._observation(observation), reward=reward, raw_reward=raw_reward,
                       terminal=terminal, done=done, truncated=bool(truncated), episode=episode)

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of an observation: the top of an Atari stack, anything else itself."""
        return self._layout.newest_frame(observation)

    def render(self) -> np.ndarray | None:
        """The screen as RGB when made with render_mode="rgb_array", else None."""
        if self._render_mode != "rgb_array":
            return None
        return np.asarray(self._stack.render())

    def close(self) -> None:
        self._stack.close()

    def state_dict(self) -> dict:
        """Everything needed to continue this env bit for bit, as a tree of plain values and arrays."""
        layers = _layers(self._stack, self._settings.id)
        return {
            "format": STATE_FORMAT,
            "settings": _state_settings(self._settings),
            "chain": [type(layer).__name__ for layer in layers],
            "episode": {"pending_seed": self._pending_seed, "needs_reset": self._needs_reset,
                        "raw_return": self._raw_return, "length": self._length, "lives": self._lives},
            "layers": {type(layer).__name__: _capturer(layer, self._settings.id).capture(layer)
                       for layer in layers},
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from a state_dict taken from an env made with the same settings; no reset needed."""
        self._check_state_fits(state)
        layers = _layers(self._stack, self._settings.id)
        for layer in layers:
            _capturer(layer, self._settings.id).restore(layer, state["layers"][type(layer).__name__])
        episode = state["episode"]
        pending_seed = episode["pending_seed"]
        self._pending_seed = None if pending_seed is None else int(pending_seed)
        self._needs_reset = bool(episode["needs_reset"])
        self._raw_return = float(episode["raw_return"])
        self._length = int(episode["length"])
        self._lives = int(episode["lives"])

    def _check_state_fits(self, state: dict) -> None:
        if state.get("format") != STATE_FORMAT:
            raise EnvError(f"{self._settings.id}: env state format {state.get('format')!r} is not "
                           f"{STATE_FORMAT}, the one this rlsup reads")
        expected = _state_settings(self._settings)
        if dict(state["settings"]) != expected:
            raise EnvError(f"{self._settings.id}: env state was taken with settings {state['settings']}, "
                           f"this env has {expected}")
        chain = [type(layer).__name__ for layer in _layers(self._stack, self._settings.id)]
        if list(state["chain"]) != chain:
            raise EnvError(f"{self._settings.id}: env state has wrappers {state['chain']}, this env {chain}")

    def _game_lives(self) -> int:
        return int(self._stack.unwrapped.ale.lives()) if self._is_atari else 0

    def _observation(self, observation: Any) -> np.ndarray:
        return self._layout.convert(observation)


def _state_settings(env: EnvSection) -> dict:
    values = dataclasses.asdict(env)
    return {name: values[name] for name in STATE_SETTINGS}


def _layers(stack: gym.Env, env_id: str) -> list[gym.Env]:
    """The wrapper chain from the outermost wrapper down to the game itself."""
    layers = [stack]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    names = [type(layer).__name__ for layer in layers]
    if len(set(names)) != len(names):
        raise EnvError(f"cannot capture the state of {env_id!r}: a wrapper appears twice in {names}")
    return layers


# ---- what each layer's state is -------------------------------------------------------------------

@dataclass(frozen=True)
class Capturer:
    """How one wrapper or game class writes its state into a tree and reads it back."""

    capture: Callable[[Any], dict]
    restore: Callable[[Any, dict], None]


def _capturer(layer: gym.Env, env_id: str) -> Capturer:
    # Exact types only: a subclass may hold state the base class's capturer would miss.
    capturer = CAPTURERS.get(type(layer))
    if capturer is None:
        raise EnvError(f"cannot capture the state of {env_id!r} mid-episode: rlsup does not know what "
                       f"{type(layer).__module__}.{type(layer).__qualname__} holds, and resuming it "
                       f"would not be exact")
    return capturer


def _capture_time_limit(layer: TimeLimit) -> dict:
    return {"elapsed_steps": layer._elapsed_steps}


def _restore_time_limit(layer: TimeLimit, state: dict) -> None:
    elapsed = state["elapsed_steps"]
    layer._elapsed_steps = None if elapsed is None else int(elapsed)


def _capture_order_enforcing(layer: OrderEnforcing) -> dict:
    return {"has_reset": bool(layer._has_reset)}


def _restore_order_enforcing(layer: OrderEnforcing, state: dict) -> None:
    layer._has_reset = bool(state["has_reset"])


def _capture_atari_preprocessing(layer: AtariPreprocessing) -> dict:
    # The two-frame max-pool buffer outlives a step: an episode end mid-skip leaves the older frame in it.
    return {"obs_buffer": np.stack(layer.obs_buffer), "lives": int(layer.lives),
            "game_over": bool(layer.game_over)}


def _restore_atari_preprocessing(layer: AtariPreprocessing, state: dict) -> None:
    buffers = np.asarray(state["obs_buffer"])
    for buffer, saved in zip(layer.obs_buffer, _checked_rows(buffers, layer.obs_buffer, "obs_buffer")):
        np.copyto(buffer, saved)
    layer.lives = int(state["lives"])
    layer.game_over = bool(state["game_over"])


def _capture_frame_stack(layer: FrameStackObservation) -> dict:
    # stacked_obs is only an output buffer, rewritten whole by every step and reset.
    return {"frames": np.stack(list(layer.obs_queue)), "padding": np.array(layer.padding_value)}


def _restore_frame_stack(layer: FrameStackObservation, state: dict) -> None:
    frames = _checked_rows(np.asarray(state["frames"]), list(layer.obs_queue), "frames")
    layer.obs_queue = deque((frame.copy() for frame in frames), maxlen=layer.stack_size)
    layer.padding_value = np.array(state["padding"], dtype=np.asarray(layer.padding_value).dtype)


def _checked_rows(saved: np.ndarray, current: list, name: str) -> np.ndarray:
    expected = (len(current), *np.shape(current[0]))
    if saved.shape != expected or saved.dtype != np.asarray(current[0]).dtype:
        raise EnvError(f"saved {name} is {saved.dtype}{list(saved.shape)}, this env holds "
                       f"{np.asarray(current[0]).dtype}{list(expected)}")
    return saved


def _capture_ale(game: AtariEnv) -> dict:
    # include_rng: sticky actions and ALE's own randomness draw from the system RNG.
    return {"ale_state": game.clone_state(include_rng=True).serialize(), **_capture_np_random(game)}


def _restore_ale(game: AtariEnv, state: dict) -> None:
    game.restore_state(ale_py.ALEState(_as_bytes(state["ale_state"])))
    _restore_np_random(game, state)


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return value.astype(np.uint8, copy=False).tobytes()
    return bytes(value)


def _classic_capturer(*attributes: str) -> Capturer:
    """A classic-control game whose per-episode state is the named attributes and its np_random."""
    def capture(game: gym.Env) -> dict:
        values = {name: _capture_value(getattr(game, name)) for name in attributes}
        return {"attributes": values, **_capture_np_random(game)}

    def restore(game: gym.Env, state: dict) -> None:
        for name in attributes:
            setattr(game, name, _restore_value(state["attributes"][name]))
        _restore_np_random(game, state)

    return Capturer(capture, restore)


def _capture_value(value: Any) -> Any:
    """A None, a number, or a tuple/list/array of numbers, kept with the container it came in."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value.item() if isinstance(value, np.generic) else value
    if isinstance(value, np.generic):
        return {"container": "scalar", "array": np.array(value)}
    if isinstance(value, (tuple, list, np.ndarray)):
        return {"container": type(value).__name__, "array": np.array(value)}
    raise EnvError(f"cannot capture a {type(value).__name__} attribute")


def _restore_value(saved: Any) -> Any:
    if not isinstance(saved, dict):
        return saved
    array = np.array(saved["array"])
    container = saved["container"]
    if container == "scalar":
        return array[()]
    if container == "tuple":
        return tuple(array)  # numpy scalars: the same float64 arithmetic as the floats they came from
    if container == "list":
        return list(array)
    return array


def _capture_np_random(game: gym.Env) -> dict:
    generator = game._np_random  # the attribute, not the property, which would seed a missing one
    return {"np_random": None if generator is None else generator_state(generator),
            "np_random_seed": getattr(game, "_np_random_seed", None)}


def _restore_np_random(game: gym.Env, state: dict) -> None:
    saved = state["np_random"]
    game._np_random = None if saved is None else restore_generator(saved)
    game._np_random_seed = state["np_random_seed"]


CAPTURERS: dict[type, Capturer] = {
    TimeLimit: Capturer(_capture_time_limit, _restore_time_limit),
    OrderEnforcing: Capturer(_capture_order_enforcing, _restore_order_enforcing),
    AtariPreprocessing: Capturer(_capture_atari_preprocessing, _restore_atari_preprocessing),
    FrameStackObservation: Capturer(_capture_frame_stack, _restore_frame_stack),
    AtariEnv: Capturer(_capture_ale, _restore_ale),
    FireReset: Capturer(lambda layer: {}, lambda layer, state: None),  # stateless between steps
    CartPoleEnv: _classic_capturer("state", "steps_beyond_terminated"),
    MountainCarEnv: _classic_capturer("state"),
    AcrobotEnv: _classic_capturer("state"),
}
