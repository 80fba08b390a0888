"""The world expert's input: an RGB uint8 frame -> a normalised tensor at the model's size."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F


class Preprocessor:
    """RGB uint8 HxWx3 -> normalised 1x3xSxS tensor for the vision encoder."""

    def __init__(self, size: int, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5), dtype=torch.float32):
        self.size = size
        self.dtype = dtype
        self._scale = torch.tensor([1.0 / (255.0 * s) for s in std]).view(1, 3, 1, 1)
        self._shift = torch.tensor([-m / s for m, s in zip(mean, std, strict=True)]).view(
            1, 3, 1, 1
        )

    def affine(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-channel (scale, shift) of the normalisation, pixel * scale + shift (the
        world expert's TorchScript graph applies it inside; the resize is not in it)."""
        return self._scale.flatten().clone(), self._shift.flatten().clone()

    def __call__(self, rgb: np.ndarray) -> torch.Tensor:
        if not (rgb.flags.c_contiguous and rgb.flags.writeable):
            rgb = np.array(rgb)  # ~50 kB copy; torch wants a writable, contiguous buffer
        return self._resize_normalise(torch.from_numpy(rgb).permute(2, 0, 1).unsqueeze(0).float())

    def on_device(self, rgb: torch.Tensor) -> torch.Tensor:
        """The same for a batch of frames already on the device (uint8 [N, H, W, 3]): the
        frames travel as bytes, a quarter of their float size, and are normalised there."""
        return self._resize_normalise(rgb.permute(0, 3, 1, 2).float())

    def _resize_normalise(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.size, self.size):
            x = F.interpolate(
                x,
                size=(self.size, self.size),
                mode='bilinear',
                align_corners=False,
                antialias=True,
            )
        if self._scale.device != x.device:  # moved once, with the first frames on a GPU
            self._scale, self._shift = self._scale.to(x.device), self._shift.to(x.device)
        return (x * self._scale + self._shift).to(self.dtype)
