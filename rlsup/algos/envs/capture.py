"""How a TrainingEnv's mid-episode state is captured and restored: each layer's own capturer, or action replay."""
from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import ale_py
import gymnasium as gym
import numpy as np
from ale_py.env import AtariEnv
from gymnasium.envs.classic_control import (AcrobotEnv, CartPoleEnv, Continuous_MountainCarEnv, MountainCarEnv,
                                            PendulumEnv)
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, OrderEnforcing, TimeLimit

from rlsup.algos.envs.action_replay import ActionReplay, ReplayMismatch
from rlsup.algos.envs.actions import EnvActions
from rlsup.algos.envs.sources import EnvError
from rlsup.algos.envs.fire_reset import FireReset
from rlsup.algos.envs.minatar_seeding import reset_carry
from rlsup.algos.envs.mujoco_capture import capture_physics, is_captured, restore_physics
from rlsup.checkpoint.rng import generator_state, restore_generator
from rlsup.spec import EnvSection, env_state_fields

STATE_FORMAT = 1
# Settings that change what a captured state means (declared with env_state=True in the spec).
STATE_SETTINGS = env_state_fields()


class StateCapture(Protocol):
    """One env's way of saving and restoring its stack mid-episode; it sees every reset and step."""

    kind: str  # the key its part of the env state is saved under: "layers" or "replay"

    def reset_seed(self, pending_seed: int | None) -> int | None:
        """The seed to hand the next reset, given the one the env was made with (None after the first)."""
        ...

    def record_reset(self, seed: int | None, observation: Any, info: Any) -> None: ...

    def record_step(self, action: int | np.ndarray, observation: Any, info: Any, ended: bool) -> None: ...

    def capture(self) -> dict: ...

    def restore(self, state: dict) -> ReplayMismatch | None:
        """Bring the stack back to the captured state; a mismatch when that proved impossible."""
        ...


class RestorableEnv(Protocol):
    """What load_env_states asks of an env (TrainingEnv, one env of a vector)."""

    def reset(self) -> np.ndarray: ...

    def load_state_dict(self, state: dict) -> ReplayMismatch | None: ...


@dataclass(frozen=True)
class EnvRestart:
    """An env resumed on a fresh episode because its saved one could not be replayed exactly."""

    index: int                # the env's place among its trainer's (or vector's) envs
    observation: np.ndarray   # the fresh episode's first observation, to act on next
    reason: str               # one sentence naming the env, for worker.log, the checkpoints and the TUI


def choose_capture(stack: gym.Env, env_id: str, seed: int, actions: EnvActions | None = None) -> StateCapture:
    """Each layer's own capturer where every layer of the stack has one (faster, and the state format of
    checkpoints from before action replay); otherwise seeded action replay, recording actions as actions
    hands them to the env."""
    layers = stack_layers(stack)
    names = [type(layer).__name__ for layer in layers]
    # Exact types only: a subclass may hold state the base class's capturer would miss.
    if len(set(names)) == len(names) and all(capturer_of(layer) is not None for layer in layers):
        return LayerCapture(layers)
    return ActionReplay(stack, env_id, seed, reset_carry(stack), actions)


def capturer_of(layer: gym.Env) -> Capturer | None:
    """The capturer of the layer's exact type: rlsup's own table, then MuJoCo's envs (mujoco_capture.py)."""
    return CAPTURERS.get(type(layer)) or (MUJOCO_CAPTURER if is_captured(type(layer)) else None)


def capture_state(capture: StateCapture, stack: gym.Env, settings: EnvSection) -> dict:
    """The env's captured state, with what it was taken under (format, settings, wrappers)."""
    return {"format": STATE_FORMAT, "settings": _state_settings(settings), "chain": layer_names(stack),
            capture.kind: capture.capture()}


def restore_state(capture: StateCapture, stack: gym.Env, settings: EnvSection,
                  state: dict) -> ReplayMismatch | None:
    """Restore a state from capture_state after checking it fits this env; a mismatch where replay failed."""
    _check_state_fits(capture, stack, settings, state)
    return capture.restore(state[capture.kind])


def load_env_states(envs: Sequence[RestorableEnv], states: Mapping[str, dict],
                    first_index: int = 0) -> list[EnvRestart]:
    """Load each env's state (keyed by its index as text, the first env's being first_index); an env whose
    saved episode did not replay exactly starts a fresh one here, and comes back in the list, so that its
    trainer acts on it."""
    restarts = []
    for index, env in enumerate(envs, start=first_index):
        mismatch = env.load_state_dict(states[str(index)])
        if mismatch is not None:
            restarts.append(EnvRestart(index, env.reset(), mismatch.sentence(index)))
    return restarts


def _check_state_fits(capture: StateCapture, stack: gym.Env, settings: EnvSection, state: dict) -> None:
    if state.get("format") != STATE_FORMAT:
        raise EnvError(f"{settings.id}: env state format {state.get('format')!r} is not "
                       f"{STATE_FORMAT}, the one this rlsup reads")
    expected = _state_settings(settings)
    if dict(state["settings"]) != expected:
        raise EnvError(f"{settings.id}: env state was taken with settings {state['settings']}, "
                       f"this env has {expected}")
    chain = layer_names(stack)
    if list(state["chain"]) != chain:
        raise EnvError(f"{settings.id}: env state has wrappers {state['chain']}, this env {chain}")
    if capture.kind not in state:
        raise EnvError(f"{settings.id}: env state holds no {capture.kind!r} part, the way this rlsup captures "
                       f"this env")


def _state_settings(env: EnvSection) -> dict:
    values = dataclasses.asdict(env)
    return {name: values[name] for name in STATE_SETTINGS}


def stack_layers(stack: gym.Env) -> list[gym.Env]:
    """The wrapper chain from the outermost wrapper down to the game itself."""
    layers = [stack]
    while isinstance(layers[-1], gym.Wrapper):
        layers.append(layers[-1].env)
    return layers


def layer_names(stack: gym.Env) -> list[str]:
    return [type(layer).__name__ for layer in stack_layers(stack)]


class LayerCapture:
    """Every layer's own capturer: ALE cloneState, classic-control attributes, the wrappers' buffers."""

    kind = "layers"

    def __init__(self, layers: list[gym.Env]):
        self._parts = [(type(layer).__name__, layer, capturer_of(layer)) for layer in layers]

    def reset_seed(self, pending_seed: int | None) -> int | None:
        # Only the first reset is seeded, later ones continue the env's RNG: the trajectories of jobs
        # from before action replay stay as they were.
        return pending_seed

    def record_reset(self, seed: int | None, observation: Any, info: Any) -> None:
        """Nothing to record: the layers hold their own state."""

    def record_step(self, action: int | np.ndarray, observation: Any, info: Any, ended: bool) -> None:
        """Nothing to record: the layers hold their own state."""

    def capture(self) -> dict:
        return {name: capturer.capture(layer) for name, layer, capturer in self._parts}

    def restore(self, state: dict) -> None:
        for name, layer, capturer in self._parts:
            capturer.restore(layer, state[name])


# ---- what each layer's state is -------------------------------------------------------------------

@dataclass(frozen=True)
class Capturer:
    """How one wrapper or game class writes its state into a tree and reads it back."""

    capture: Callable[[Any], dict]
    restore: Callable[[Any, dict], None]


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
    # last_u, the torque of the last step, is drawn by render only; saved so that a resumed frame is the same.
    PendulumEnv: _classic_capturer("state", "last_u"),
    Continuous_MountainCarEnv: _classic_capturer("state"),
}


def _capture_mujoco(game: gym.Env) -> dict:
    return {**capture_physics(game), **_capture_np_random(game)}


def _restore_mujoco(game: gym.Env, state: dict) -> None:
    restore_physics(game, state)
    _restore_np_random(game, state)


# Gymnasium's MuJoCo envs (mujoco_capture.CAPTURED_CLASSES), matched by name: importing their classes here
# would import mujoco into every process.
MUJOCO_CAPTURER = Capturer(_capture_mujoco, _restore_mujoco)
