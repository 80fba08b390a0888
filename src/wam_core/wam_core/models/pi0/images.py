"""π0's image processing in torch: what its processor does, without torchvision.

``PI0ImageProcessor`` runs on transformers' torchvision backend, and PyPI's torchvision
is a CUDA build that does not import beside the CPU torch this stack pins. The steps
are few and documented (``image_processing_backends.TorchvisionBackend._preprocess``):

1. resize: to an exact (height, width), or keeping the aspect ratio so the image fits
   (max_height, max_width) with one side touching it (sizes truncated to integers);
   bicubic or bilinear with antialiasing. A uint8 image is interpolated in float32,
   then clamped and rounded back to uint8 values, as torchvision does for uint8;
2. rescale (1/255) and normalise ((x - mean) / std);
3. pad bottom and right with zeros to the pad size.

A frame already at the output size is not resized. Not compared against torchvision on
this machine (it cannot be installed here); the tests check each step's arithmetic.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .serving import ImageProcessing


def fitted_size(height: int, width: int, max_height: int, max_width: int) -> tuple[int, int]:
    """The size keeping the aspect ratio with one side at its maximum (transformers'
    ``get_image_size_for_max_height_width``: truncated, never rounded up)."""
    scale = min(max_height / height, max_width / width)
    return int(height * scale), int(width * scale)


class Pi0Images:
    """HxWx3 uint8 RGB frames -> [N, 3, S, S] pixel values in ``dtype`` on ``device``."""

    def __init__(self, steps: ImageProcessing, dtype=torch.float32, device='cpu'):
        self.steps = steps
        self.dtype = dtype
        self.device = torch.device(device)
        scale = [steps.rescale_factor / s for s in steps.std]
        shift = [-m / s for m, s in zip(steps.mean, steps.std, strict=True)]
        self._scale = torch.tensor(scale, device=self.device).view(1, 3, 1, 1)
        self._shift = torch.tensor(shift, device=self.device).view(1, 3, 1, 1)

    def target_size(self, height: int, width: int) -> tuple[int, int]:
        s = self.steps
        if s.size is not None:
            return s.size
        return fitted_size(height, width, *s.max_size)

    def one(self, frame: np.ndarray) -> torch.Tensor:
        """One frame -> [1, 3, S, S]."""
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(f'an HxWx3 uint8 frame is needed, got {frame.shape} {frame.dtype}')
        x = torch.from_numpy(np.ascontiguousarray(frame)).to(self.device)
        x = x.permute(2, 0, 1).unsqueeze(0).float()
        size = self.target_size(frame.shape[0], frame.shape[1])
        if tuple(x.shape[-2:]) != size:
            x = F.interpolate(
                x, size=size, mode=self.steps.resample, align_corners=False, antialias=True
            )
            x = x.clamp_(0.0, 255.0).round_()  # back to uint8 values, as torchvision does
        x = x * self._scale + self._shift
        pad = self.steps.pad_size
        if pad is not None and tuple(x.shape[-2:]) != pad:
            dh, dw = pad[0] - x.shape[-2], pad[1] - x.shape[-1]
            if dh < 0 or dw < 0:
                raise ValueError(f'image {tuple(x.shape[-2:])} larger than the pad size {pad}')
            x = F.pad(x, (0, dw, 0, dh), value=0.0)
        return x.to(self.dtype)

    def __call__(self, frames: list[np.ndarray]) -> torch.Tensor:
        return torch.cat([self.one(f) for f in frames])
