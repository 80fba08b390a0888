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
        self.calls = 0  # frames encoded: the "world-expert calls" metric
        self.forwards = 0  # forward passes (a batch of frames is one)

    @property
    def shape(self):
        return (self.tokens, self.hidden)

    @torch.inference_mode()
    def encode(self, rgb: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Encode one HxWx3 uint8 RGB frame; write into ``out`` when given."""
        pixels = self.preprocess(rgb).to(self.device)
        hidden = self.model(pixel_values=pixels).last_hidden_state[0]
        self.calls += 1
        self.forwards += 1
        result = hidden.float().cpu().numpy()
        if out is not None:
            out[...] = result
            return out
        return result

    @torch.inference_mode()
    def encode_batch(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        """Encode several HxWx3 uint8 frames (a fleet's robots) in one forward pass."""
        if len(frames) == 1:
            return [self.encode(frames[0])]
        pixels = torch.cat([self.preprocess(f) for f in frames]).to(self.device)
        hidden = self.model(pixel_values=pixels).last_hidden_state
        self.calls += len(frames)
        self.forwards += 1
        return list(hidden.float().cpu().numpy())

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        """Run n encodes of a synthetic frame; return the mean seconds per encode."""
        if n <= 0:
            return 0.0
        rng = np.random.default_rng(0)
        frame = rng.integers(0, 255, size=(self.image_size, self.image_size, 3), dtype=np.uint8)
        calls, forwards = self.calls, self.forwards
        t0 = time.perf_counter()
        for _ in range(n):
            self.encode(frame)
        mean = (time.perf_counter() - t0) / n
        for size in batch_sizes:  # each batch shape a fleet will send, once or twice
            if size > 1:
                for _ in range(2):
                    self.encode_batch([frame] * size)
        self.calls, self.forwards = calls, forwards  # warm-up encodes are not frames
        return mean
