"""World expert (type ``vit``): a transformers ViT vision encoder, from a local directory.

It runs once per distinct observation; each view's last hidden state ([tokens, hidden],
65x192 for the default 128 px / patch 16 model) is that view's part of the
*representation* the action expert reuses on every control tick. The views it needs
are the manifest's ``extra.views`` (default: one, ``front``); all views of an
observation go through one batched forward pass.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from transformers import ViTConfig, ViTModel

from .contract import ContractError, Observation, ViewSpec, WorldExpertSpec
from .manifest import verify_manifest
from .precision import DTYPES, resolve_precision
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
    """Encode an observation into representation tokens (float32 numpy, [V*T, D])."""

    def __init__(self, model_dir: str, precision: str = 'bf16', device: str = 'cpu', robot=None):
        self.manifest = verify_manifest(model_dir)  # refuse tampered weights before touching them
        self.version = self.manifest.version
        self.name = self.manifest.name
        self.dtype = DTYPES[resolve_precision(precision)]
        self.device = torch.device(device)
        self.model = ViTModel.from_pretrained(model_dir, add_pooling_layer=False, dtype=self.dtype)
        self.model.eval().to(self.device)
        cfg = self.model.config
        self.image_size = cfg.image_size
        self.tokens = representation_tokens(cfg)
        self.hidden = cfg.hidden_size
        self.preprocess = Preprocessor(self.image_size, dtype=self.dtype)
        views = self.manifest.extra.get('views') or ['front']
        if not isinstance(views, list) or not all(isinstance(v, str) for v in views):
            raise ContractError(f'{model_dir!r}: manifest extra.views must be a list of names')
        self.spec = WorldExpertSpec(
            views=tuple(ViewSpec(v, self.image_size, self.image_size) for v in views),
            view_shape=(self.tokens, self.hidden),
        )
        self.calls = 0  # observations encoded: the "world-expert calls" metric
        self.forwards = 0  # forward passes (a batch of observations is one)

    @property
    def shape(self):
        return self.spec.shape

    def _frames(self, observation) -> list[np.ndarray]:
        if isinstance(observation, np.ndarray):  # a lone frame: the only view
            if len(self.spec.views) != 1:
                raise ValueError(f'this expert needs the views {self.spec.view_names}')
            return [observation]
        try:
            return [observation.views[name] for name in self.spec.view_names]
        except KeyError as exc:
            raise ValueError(f'observation lacks the view {exc.args[0]!r}') from None

    @torch.inference_mode()
    def encode(self, observation: Observation | np.ndarray) -> np.ndarray:
        """One observation (or, for a one-view expert, one HxWx3 uint8 frame)."""
        return self.encode_batch([observation])[0]

    @torch.inference_mode()
    def encode_batch(self, observations) -> list[np.ndarray]:
        """Several observations (a fleet's robots), every view of each, in one forward."""
        frames = [f for o in observations for f in self._frames(o)]
        pixels = torch.cat([self.preprocess(f) for f in frames]).to(self.device)
        hidden = self.model(pixel_values=pixels).last_hidden_state.float().cpu().numpy()
        self.calls += len(observations)
        self.forwards += 1
        per = len(self.spec.views)
        return [
            hidden[i * per : (i + 1) * per].reshape(self.spec.shape)
            for i in range(len(observations))
        ]

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        """Run n encodes of a synthetic frame; return the mean seconds per encode."""
        if n <= 0:
            return 0.0
        rng = np.random.default_rng(0)
        frame = rng.integers(0, 255, size=(self.image_size, self.image_size, 3), dtype=np.uint8)
        obs = Observation(dict.fromkeys(self.spec.view_names, frame))
        calls, forwards = self.calls, self.forwards
        t0 = time.perf_counter()
        for _ in range(n):
            self.encode(obs)
        mean = (time.perf_counter() - t0) / n
        for size in batch_sizes:  # each batch shape a fleet will send, once or twice
            if size > 1:
                for _ in range(2):
                    self.encode_batch([obs] * size)
        self.calls, self.forwards = calls, forwards  # warm-up encodes are not frames
        return mean
