"""rlsup export: a checkpoint's greedy policy as a TorchScript or ONNX file, with a JSON that says how to feed it."""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch

import rlsup
from rlsup import atomic
from rlsup.spec import registry
from rlsup.algos.envs.actions import ActionSpace, action_space_of
from rlsup.algos.envs.sources import ATARI_SCREEN_SIZE, make_stack, observation_layout
from rlsup.algos.envs.training import describe
from rlsup.algos.envs.observations import INTENSITY_MAX, ObservationLayout
from rlsup.spec import EnvSection

FORMATS = ("torchscript", "onnx")
ONNX_EXTRA = "pip install 'rlsup[onnx]'"
INPUT_NAME, OUTPUT_NAME = "observations", "actions"
ONNX_OPSET = 18


class ExportUnavailable(RuntimeError):
    """What the format needs is not installed; one sentence naming the pip command."""


def metadata_path(out: Path) -> Path:
    """Where the JSON beside a model goes: FILE.json (policy.onnx -> policy.onnx.json)."""
    return out.with_name(out.name + ".json")


def export_policy(run_dir: Path, load: Callable[[], tuple], *, format: str, out: Path,
                  started: Callable[[], None] = lambda: None) -> Path:
    """Write the checkpoint's greedy policy to out and its description beside it; returns the JSON's path.

    load returns (the run's spec, the checkpoint's trainer state, its entry), as enjoy.read_trainer_state
    does: the caller picks the checkpoint, so that this module imports nothing above algos/. It is called
    once the format is known to be writable. started is called once the checkpoint is loaded and the env
    described, before anything is written."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")
    if format == "onnx":
        require_onnx()
    spec, trainer_state, entry = load()
    try:
        module = registry.get(spec.job.algo).greedy_network_from_checkpoint(spec, trainer_state)
    except registry.UnknownAlgorithm as error:
        raise ExportUnavailable(str(error)) from None
    layout, actions, action_meanings = describe_observations(spec.env)
    example = torch.as_tensor(np.zeros((1, *layout.shape), dtype=layout.dtype))
    started()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")  # renamed into place: a failed export leaves no half file
    try:
        (write_torchscript if format == "torchscript" else write_onnx)(module, example, partial)
        os.replace(partial, out)
    except BaseException:  # Ctrl-C included: nor a half file beside it
        partial.unlink(missing_ok=True)
        raise
    target = metadata_path(out)
    # The user's artefact, like the model torch wrote beside it: 0666 less the umask, not a run file's 0600.
    atomic.write_json(target, mode=0o666, value={
        "format": format, "model": out.name, "rlsup_version": rlsup.__version__,
        "input": {"name": INPUT_NAME, "shape": [None, *layout.shape], "dtype": layout.dtype.name},
        "output": output_json(actions),
        "inside_model": inside_model(layout), "outside_model": outside_model(spec.env, layout),
        "observation": observation_json(layout), "preprocessing": preprocessing_json(spec.env),
        "actions": actions_json(actions, action_meanings),
        "source": {"run_dir": str(run_dir), "job_name": spec.job.name, "algo": spec.job.algo,
                   "checkpoint": entry.path.name, "step": entry.step, "reason": entry.reason,
                   "fingerprint": entry.fingerprint}})
    return target


def require_onnx() -> None:
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401  (torch.onnx.export's exporter needs it)
    except ImportError as error:
        raise ExportUnavailable(f"exporting to ONNX needs {error.name}, which is not installed: {ONNX_EXTRA}") from None


def write_torchscript(module: torch.nn.Module, example: torch.Tensor, out: Path) -> None:
    """Traced on one observation: the networks have no data-dependent branches, and any batch size works."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit is deprecated in favour of torch.export, which has no .pt runtime
        traced = torch.jit.trace(module, example)
    traced.save(str(out))


def write_onnx(module: torch.nn.Module, example: torch.Tensor, out: Path) -> None:
    """torch.onnx.export's torch.export-based exporter (it needs onnxscript), with a dynamic batch size."""
    batch = torch.export.Dim("batch", min=1)
    # The exporter checks a dynamic dimension against the example; 1 would be specialised, so use 2.
    examples = (example.expand(2, *example.shape[1:]).contiguous(),)
    exporter_log = logging.getLogger("torch.onnx")
    level = exporter_log.level
    exporter_log.setLevel(logging.ERROR)  # it warns, for every export, that torchvision's operators are absent
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(module, examples, input_names=[INPUT_NAME], output_names=[OUTPUT_NAME],
                                        dynamic_shapes=({0: batch},), opset_version=ONNX_OPSET, dynamo=True,
                                        verbose=False)
    finally:
        exporter_log.setLevel(level)
    program.save(str(out))


def describe_observations(env: EnvSection) -> tuple[ObservationLayout, ActionSpace, list[str] | None]:
    """The env's observation layout, its actions and their names where it has them (ALE games do; fused ones
    name none)."""
    if env.source == "fused":
        description = describe(env)
        return description.observation, description.actions, None
    stack = make_stack(env)
    try:
        names = getattr(stack.unwrapped, "get_action_meanings", None)
        return (observation_layout(stack, env), action_space_of(env.id, stack.action_space),
                list(names()) if callable(names) else None)
    finally:
        stack.close()


def output_json(actions: ActionSpace) -> dict:
    """What the model returns: an action number per observation, or an action vector within the bounds."""
    if not actions.continuous:
        return {"name": OUTPUT_NAME, "shape": [None], "dtype": "int64",
                "meaning": "the greedy action of each observation"}
    return {"name": OUTPUT_NAME, "shape": [None, actions.count], "dtype": "float32",
            "meaning": "the deterministic action of each observation (the policy's mean), within the bounds"}


def actions_json(actions: ActionSpace, meanings: list[str] | None) -> dict:
    """The sidecar's "actions": their count and names, or for a continuous vector its length and bounds."""
    if not actions.continuous:
        return {"count": actions.count, "meanings": meanings}
    return {"count": actions.count, **action_bounds_json(actions)}


def action_bounds_json(actions: ActionSpace) -> dict:
    """A continuous action's bounds as the sidecar carries them: low and high, one number per entry."""
    return {"kind": actions.kind, "low": list(actions.low), "high": list(actions.high)}


def inside_model(layout: ObservationLayout) -> str:
    if layout.dtype == np.uint8:
        return f"uint8 observations are divided by {INTENSITY_MAX} (to [0, 1] float32) inside the model"
    return "float32 observations go into the network as they are"


def outside_model(env: EnvSection, layout: ObservationLayout) -> str:
    """What a caller does before the model, in a sentence, as rlsup's env wrappers do."""
    if layout.kind == "stack":
        return (f"DeepMind's Atari preprocessing (no-op starts, frame skip {env.frame_skip} with max-pooling of the "
                f"last two frames, {ATARI_SCREEN_SIZE}x{ATARI_SCREEN_SIZE} grey) and a stack of the last "
                f"{env.frame_stack} frames, oldest first, as uint8")
    if layout.kind == "vector":
        return "the env's observation as float32"
    steps = []
    if layout.flat_image:
        steps.append("a channel axis added in front")
    elif layout.channels_last:
        steps.append("transposed from (height, width, channels) to (channels, height, width)")
    if layout.source_dtype == np.bool_:
        steps.append(f"bool as uint8 0/{INTENSITY_MAX}")
    return "the env's image " + (", ".join(steps) if steps else "as it is") + f", as {layout.dtype.name}"


def observation_json(layout: ObservationLayout) -> dict:
    return {"kind": layout.kind, "shape": list(layout.shape), "dtype": layout.dtype.name,
            "env_dtype": layout.source_dtype.name, "channels_last_in_env": layout.channels_last,
            "flat_image_in_env": layout.flat_image, "stack_size": layout.stack_size}


# [env] fields that act only inside the Atari preset's chain; a classic env ignores them.
ATARI_ONLY = ("frame_skip", "frame_stack", "noop_max", "sticky_actions", "fire_reset")
# [env] fields that change rewards and episode ends for learning, never what the policy sees.
LEARNING_ONLY = ("num_envs", "clip_rewards", "episodic_life")


def preprocessing_json(env: EnvSection) -> dict:
    """The [env] settings that shape what the policy sees, and for Atari the fixed parts of DeepMind's chain."""
    skipped = LEARNING_ONLY + (() if env.preset == "atari" else ATARI_ONLY)
    settings = {key: value for key, value in dataclasses.asdict(env).items() if key not in skipped}
    if env.preset == "atari":
        settings.update(grayscale=True, screen_size=ATARI_SCREEN_SIZE, max_pool_last_two_frames=True,
                        full_action_space=False)
    return json.loads(json.dumps(settings))
