"""The one layout observations reach the networks in, and the rule that picks a network for it (no torch)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

NETWORKS = ("mlp", "nature_cnn", "small_cnn")
# The Nature torso's three convolutions (8/4, 4/2, 3/1) leave at least one pixel only from 36 pixels on.
NATURE_MINIMUM_SIDE = 36
# The small torso's one 3x3 convolution needs 3 pixels.
SMALL_MINIMUM_SIDE = 3
# Unsigned bytes are pixel intensities: the torsos divide them by this, so bool images are stored as 0 or 255.
INTENSITY_MAX = 255


class NetworkError(ValueError):
    """A network that cannot take an observation of this shape."""


@dataclass(frozen=True)
class ObservationLayout:
    """How one env's observations are stored and fed to the networks.

    kind "vector": float32 (n,); "image": (channels, height, width), uint8 for bool and uint8 spaces
    (bool true as 255), float32 otherwise; "stack": the Atari preset's (stack, 84, 84) uint8 frames.
    """

    kind: Literal["vector", "image", "stack"]
    shape: tuple
    dtype: np.dtype
    source_dtype: np.dtype          # the env's own observation dtype
    channels_last: bool = False     # the env hands images out as (height, width, channels)
    flat_image: bool = False        # the env hands images out as (height, width): one channel

    @property
    def stack_size(self) -> int:
        return self.shape[0] if self.kind == "stack" else 1

    @property
    def frame_shape(self) -> tuple:
        """What one replay row holds: a stack's single frame, else the whole observation."""
        return self.shape[1:] if self.kind == "stack" else self.shape

    def convert(self, observation) -> np.ndarray:
        """The env's observation in this layout, as a fresh array the env cannot overwrite later."""
        if self.kind == "stack":
            return observation  # FrameStackObservation hands out a fresh copy each step
        if self.kind == "vector":
            return np.array(observation, dtype=np.float32)
        image = np.asarray(observation)
        if self.flat_image:
            image = image[np.newaxis]
        elif self.channels_last:
            image = image.transpose(2, 0, 1)
        is_bool = image.dtype == np.bool_
        image = np.array(image, dtype=self.dtype, order="C")  # a fresh copy, channels first in memory too
        if is_bool:
            image *= np.uint8(INTENSITY_MAX)
        return image

    def newest_frame(self, observation: np.ndarray) -> np.ndarray:
        """The latest frame of an observation: the top of an Atari stack, anything else itself."""
        return observation[-1] if self.kind == "stack" else observation


def layout_of(shape: tuple, dtype: np.dtype, *, stacked: bool, image_layout: str = "auto") -> ObservationLayout:
    """The layout of a Box observation space of this shape and dtype; stacked: the Atari preset's frames.

    image_layout "auto" reads a 3-d shape as channels first when its first side is the smaller of its
    first and last ((4, 84, 84), (3, 64, 64)), else as channels last, Gymnasium's image convention
    ((10, 10, 4) of MinAtar, (210, 160, 3)); "hwc" and "chw" say it outright.
    """
    shape, dtype = tuple(int(side) for side in shape), np.dtype(dtype)
    if stacked:
        return ObservationLayout("stack", shape, np.dtype(np.uint8), dtype)
    if 0 in shape:
        raise NetworkError(f"an observation of shape {shape} holds no values to learn from")
    if len(shape) == 1:
        return ObservationLayout("vector", shape, np.dtype(np.float32), dtype)
    storage = np.dtype(np.uint8) if dtype in (np.bool_, np.uint8) else np.dtype(np.float32)
    if len(shape) == 2:
        return ObservationLayout("image", (1, *shape), storage, dtype, flat_image=True)
    if len(shape) != 3:
        raise NetworkError(f"an observation of shape {shape} is neither a vector (1 dimension) nor an image "
                           f"(2 or 3 dimensions)")
    channels_last = image_layout == "hwc" or (image_layout == "auto" and not shape[0] < shape[2])
    channels_first = (shape[2], shape[0], shape[1]) if channels_last else shape
    return ObservationLayout("image", channels_first, storage, dtype, channels_last=channels_last)


def network_for(requested: str, shape: tuple) -> str:
    """The network an observation of this (canonical) shape gets: requested, or by rule when "auto".

    The rule: an MLP for vectors; the Nature CNN for images of at least 36 pixels a side (Atari's 84);
    MinAtar's small CNN for smaller images of at least 3; an MLP over the flattened image below that.
    Runs made before the rule existed (vectors, Atari stacks) get what they were built with.
    """
    shape = tuple(shape)
    if requested == "auto":
        if len(shape) != 3:
            return "mlp"
        side = min(shape[1:])
        return "nature_cnn" if side >= NATURE_MINIMUM_SIDE else "small_cnn" if side >= SMALL_MINIMUM_SIDE else "mlp"
    if requested not in NETWORKS:
        raise NetworkError(f"unknown network {requested!r}; one of auto, {', '.join(NETWORKS)}")
    minimum = {"nature_cnn": NATURE_MINIMUM_SIDE, "small_cnn": SMALL_MINIMUM_SIDE}.get(requested)
    if minimum is not None and (len(shape) != 3 or min(shape[1:]) < minimum):
        raise NetworkError(f"network {requested!r} needs an image of at least {minimum}x{minimum} pixels; "
                           f"this env's observation is {_describe(shape)}")
    return requested


def _describe(shape: tuple) -> str:
    if len(shape) == 3:
        return f"{shape[0]} channels of {shape[1]}x{shape[2]}"
    return f"a vector of {shape[0]}" if len(shape) == 1 else f"of shape {shape}"
