"""Synthetic camera and joint-state source (until the simulated robot lands).

Frames are deterministic for a seed: a colour gradient with a moving square and
the frame index burned into the top row, so every frame is distinct unless
``static`` is set (then every frame is identical, the encode-once case).
"""

from __future__ import annotations

import numpy as np


class SyntheticScene:
    def __init__(self, size: int = 128, num_joints: int = 7, seed: int = 0, static: bool = False):
        rng = np.random.default_rng(seed)
        self.size = size
        self.static = static
        y, x = np.mgrid[0:size, 0:size]
        base = np.stack([x * 255 // size, y * 255 // size, (x + y) * 127 // size], axis=-1).astype(
            np.uint8
        )
        self._base = base
        self._frame = base.copy()
        self._phase = rng.uniform(0, 2 * np.pi, num_joints)
        self._amp = rng.uniform(0.2, 0.6, num_joints)

    def frame(self, index: int) -> np.ndarray:
        """HxWx3 uint8 RGB; the returned buffer is reused by the next call."""
        if self.static:
            return self._base
        f = self._frame
        f[...] = self._base
        s = self.size
        cx = int((index * 3) % (s - 16))
        cy = int((s - 16) / 2 * (1 + np.sin(index / 15.0)))
        f[cy : cy + 16, cx : cx + 16] = (220, 30, 30)
        f[0, :8, 0] = np.frombuffer(int(index).to_bytes(8, 'little'), np.uint8)
        return f

    def joints(self, t: float) -> np.ndarray:
        if self.static:  # nothing moves in a static scene (a moving arm would be in the image)
            t = 0.0
        return (self._amp * np.sin(0.5 * t + self._phase)).astype(np.float64)
