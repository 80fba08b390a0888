"""Camera frames: validation of sensor_msgs/Image fields and the observation fingerprint.

Everything here takes plain fields (encoding, height, width, step, data) so it is
tested without ROS. Invalid frames raise ``ImageError`` with a one-line reason.
"""

from __future__ import annotations

import hashlib

import numpy as np

SUPPORTED_ENCODINGS = ('rgb8', 'bgr8')
MAX_SIDE = 8192


class ImageError(ValueError):
    """The frame cannot be used: ``reason`` is a short code (the rejection counters' key:
    encoding, size, step, empty, length, stamp_future, stamp_old, view_missing, frozen),
    the message says why in words."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def frame_to_array(encoding: str, height: int, width: int, step: int, data) -> np.ndarray:
    """Validate Image fields and return an HxWx3 uint8 RGB view (no copy for rgb8)."""
    if encoding not in SUPPORTED_ENCODINGS:
        raise ImageError(
            'encoding',
            f'unsupported encoding {encoding!r} (supported: {", ".join(SUPPORTED_ENCODINGS)})',
        )
    if not (0 < height <= MAX_SIDE and 0 < width <= MAX_SIDE):
        raise ImageError('size', f'bad image size {width}x{height}')
    if step < width * 3:
        raise ImageError('step', f'step {step} < width*3 = {width * 3}')
    buf = (
        np.frombuffer(data, dtype=np.uint8)
        if not isinstance(data, np.ndarray)
        else data.reshape(-1)
    )
    if buf.size == 0:
        raise ImageError('empty', 'empty image data')
    if buf.size != step * height:
        raise ImageError(
            'length', f'data length {buf.size} != step*height = {step}*{height} = {step * height}'
        )
    rows = buf.reshape(height, step)[:, : width * 3]
    img = rows.reshape(height, width, 3)
    if encoding == 'bgr8':
        img = img[:, :, ::-1]
    return img


def fingerprint(encoding: str, height: int, width: int, data) -> str:
    """Observation fingerprint: a 128-bit BLAKE2b of the pixel bytes and layout.

    Identical frames (e.g. a static scene) share a fingerprint and are encoded once.
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(f'{encoding}:{height}x{width}:'.encode())
    h.update(memoryview(data) if not isinstance(data, np.ndarray) else data.tobytes())
    return h.hexdigest()


def observation_fingerprint(view_fingerprints: dict[str, str]) -> str:
    """One fingerprint over every view of an observation (names and frames): a set
    differing in any view is another observation. One view keeps its own fingerprint."""
    if len(view_fingerprints) == 1:
        return next(iter(view_fingerprints.values()))
    h = hashlib.blake2b(digest_size=16)
    for name, fp in sorted(view_fingerprints.items()):
        h.update(f'{name}={fp};'.encode())
    return h.hexdigest()


def with_prompt(fp: str, prompt: str) -> str:
    """The fingerprint of an observation whose representation also depends on the task's
    text (a VLM's prompt): the same pixels under another subtask are another observation."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f'{fp};prompt={prompt}'.encode())
    return h.hexdigest()
