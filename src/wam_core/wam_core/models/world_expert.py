"""World expert: a transformers ViT vision encoder, loaded from a local directory.

It runs once per distinct camera frame; its last hidden state ([tokens, hidden],
65x192 for the default 128 px / patch 16 model) is the *representation* that the
action expert reuses on every control tick.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from transformers import ViTConfig, ViTModel

from .manifest import verify_manifest
from .precision import DTYPES
from .preprocess import Preprocessor


def default_world_config() -> ViTConfig:
    return ViTConfig(
        hidden_size=192,
        num_hidden_layers=4,
        num_attention_heads=3,
        intermediate_size=768,
        image_size=128,
        patch_size=16,
        num_channels=3,
        hidden_act='gelu',
        layer_norm_eps=1e-6,
        qkv_bias=True,
    )


def representation_tokens(cfg: ViTConfig) -> int:
    """Tokens of a ViT's representation: one per patch plus the CLS token."""
    return (cfg.image_size // cfg.patch_size) ** 2 + 1


class WorldExpert:
    """Encode an RGB frame into representation tokens (float32 numpy, [T, D])."""

    def __init__(self, model_dir: str, precision: str = 'bf16', device: str = 'cpu'):
        self.manifest = verify_manifest(model_dir)  # refuse tampered weights before touching them
        self.version = self.manifest.version
        self.dtype = DTYPES[precision]
        self.device = torch.device(device)
        self.model = ViTModel.from_pretrained(model_dir, add_pooling_layer=False, dtype=self.dtype)
        self.model.eval().to(self.device)
        cfg = self.model.config
        self.image_size = cfg.image_size
        self.tokens = representation_tokens(cfg)
        self.hidden = cfg.hidden_size
        self.preprocess = Preprocessor(self.image_size, dtype=self.dtype)
        self.calls = 0  # number of real encodes: the "world-expert calls" metric

    @property
    def shape(self):
        return (self.tokens, self.hidden)

    @torch.inference_mode()
    def encode(self, rgb: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Encode one HxWx3 uint8 RGB frame; write into ``out`` when given."""
        pixels = self.preprocess(rgb).to(self.device)
        hidden = self.model(pixel_values=pixels).last_hidden_state[0]
        self.calls += 1
        result = hidden.float().cpu().numpy()
        if out is not None:
            out[...] = result
            return out
        return result

    def warmup(self, n: int) -> float:
        """Run n encodes of a synthetic frame; return the mean seconds per encode."""
        if n <= 0:
            return 0.0
        rng = np.random.default_rng(0)
        frame = rng.integers(0, 255, size=(self.image_size, self.image_size, 3), dtype=np.uint8)
        calls = self.calls
        t0 = time.perf_counter()
        for _ in range(n):
            self.encode(frame)
        self.calls = calls  # warm-up encodes are not frames
        return (time.perf_counter() - t0) / n
