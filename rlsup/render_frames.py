"""Rendered frames as `enjoy` shows them: RGB bytes, and large enough to see."""
from __future__ import annotations

import numpy as np

# The smaller side a video frame is enlarged to at least: MinAtar's 10×10 becomes 160×160, as wide as Atari's.
VIDEO_MIN_SIDE = 160


def rgb_bytes(frame: np.ndarray) -> np.ndarray:
    """frame as (height, width, 3) uint8, whatever the env drew.

    MinAtar draws float64 in [0, 1], which a plain cast to uint8 turns black; a float frame with values
    past 1 is taken to be on 0-255 already. A grey frame (height, width) gets three equal channels."""
    frame = np.asarray(frame)
    if frame.dtype == np.bool_:
        frame = frame.astype(np.float64)
    if frame.dtype.kind == "f":
        scale = 255.0 if frame.size and np.nanmax(frame) <= 1.0 else 1.0
        frame = np.clip(np.nan_to_num(frame * scale), 0, 255).round()
    frame = frame.astype(np.uint8)
    if frame.ndim == 2:
        frame = np.repeat(frame[..., None], 3, axis=2)
    return np.ascontiguousarray(frame[..., :3])


def enlarged(frame: np.ndarray, factor: int) -> np.ndarray:
    """Each pixel as a factor × factor block: a small frame made visible without blurring its cells."""
    return frame if factor <= 1 else np.repeat(np.repeat(frame, factor, axis=0), factor, axis=1)


def video_frame(frame: np.ndarray) -> np.ndarray:
    """An RGB frame for the mp4, enlarged by a whole factor until its smaller side reaches VIDEO_MIN_SIDE."""
    frame = rgb_bytes(frame)
    smaller = min(frame.shape[:2]) or 1
    return enlarged(frame, -(-VIDEO_MIN_SIDE // smaller))
