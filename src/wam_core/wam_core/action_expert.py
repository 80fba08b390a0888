"""Action expert: a small cross-attention decoder over the world representation.

H learned queries (one per future point of the chunk) carry the joint state, the
subtask vector and the representation's first (CLS) token, the global summary of the
scene; each layer self-attends among queries and cross-attends to the representation
tokens. (Trained without the CLS path, the decoder learned to ignore the image: a few
object patches among 65 tokens are a weak signal next to the joint state.) The cross-attention keys/values depend only on the
representation, so ``prepare`` computes them once per representation and every
50 Hz tick that reuses it runs only the query side (``decode``).

Output: absolute joint position targets [H, N] (radians; metres for prismatic
joints) at the control period, as residuals on the current joint positions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import PretrainedConfig, PreTrainedModel

from .manifest import verify_manifest


def default_delta_scale(joint_names) -> List[float]:
    """Per-joint bound on a chunk's distance from the current position: 0.5 rad, 5 cm for a gripper."""
    return [0.05 if 'gripper' in n else 0.5 for n in joint_names]


class ActionExpertConfig(PretrainedConfig):
    model_type = 'wam_action_expert'

    def __init__(self, repr_dim: int = 192, d_model: int = 256, num_heads: int = 4, num_layers: int = 2,
                 chunk_size: int = 16, num_joints: int = 7, subtask_dim: int = 384, mlp_ratio: int = 4,
                 max_delta: float = 0.5, global_token: bool = True, delta_scale=None, **kwargs):
        super().__init__(**kwargs)
        self.repr_dim = repr_dim
        self.d_model = d_model
        self.num_heads = num_heads
        self.num_layers = num_layers
        self.chunk_size = chunk_size
        self.num_joints = num_joints
        self.subtask_dim = subtask_dim
        self.mlp_ratio = mlp_ratio
        self.max_delta = max_delta     # bound on |target - current| per point, rad
        self.global_token = global_token   # condition the queries on the CLS token too
        # per-joint bound on |target - current| (rad, or m for a prismatic gripper);
        # a gripper bounded by 0.5 m would need a tiny tanh input and saturates easily
        self.delta_scale = list(delta_scale) if delta_scale is not None else [max_delta] * num_joints


@dataclass
class MemoryKV:
    """Per-layer cross-attention keys/values of one representation: [B, heads, T, dh]."""
    keys: List[torch.Tensor]
    values: List[torch.Tensor]
    context: Optional[torch.Tensor] = None     # [B, d]: the projected CLS token


class _DecoderLayer(nn.Module):
    def __init__(self, cfg: ActionExpertConfig):
        super().__init__()
        d, self.h = cfg.d_model, cfg.num_heads
        self.dh = d // self.h
        self.ln_self = nn.LayerNorm(d)
        self.qkv_self = nn.Linear(d, 3 * d)
        self.out_self = nn.Linear(d, d)
        self.ln_cross = nn.LayerNorm(d)
        self.q_cross = nn.Linear(d, d)
        self.kv_cross = nn.Linear(d, 2 * d)       # applied to memory once per representation
        self.out_cross = nn.Linear(d, d)
        self.ln_mlp = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, cfg.mlp_ratio * d), nn.GELU(), nn.Linear(cfg.mlp_ratio * d, d))

    def _heads(self, x):            # [B, L, d] -> [B, h, L, dh]
        b, l, _ = x.shape
        return x.view(b, l, self.h, self.dh).transpose(1, 2)

    def _merge(self, x):            # [B, h, L, dh] -> [B, L, d]
        b, _, l, _ = x.shape
        return x.transpose(1, 2).reshape(b, l, self.h * self.dh)

    def memory_kv(self, memory):
        k, v = self.kv_cross(memory).chunk(2, dim=-1)
        return self._heads(k), self._heads(v)

    def forward(self, x, k_mem, v_mem):
        q, k, v = self.qkv_self(self.ln_self(x)).chunk(3, dim=-1)
        x = x + self.out_self(self._merge(F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v))))
        q = self._heads(self.q_cross(self.ln_cross(x)))
        x = x + self.out_cross(self._merge(F.scaled_dot_product_attention(q, k_mem, v_mem)))
        return x + self.mlp(self.ln_mlp(x))


class ActionExpert(PreTrainedModel):
    config_class = ActionExpertConfig
    base_model_prefix = 'action_expert'
    main_input_name = 'representation'

    def __init__(self, config: ActionExpertConfig):
        super().__init__(config)
        d = config.d_model
        self.mem_proj = nn.Linear(config.repr_dim, d)
        self.mem_ln = nn.LayerNorm(d)
        self.queries = nn.Parameter(torch.randn(config.chunk_size, d) * 0.02)
        self.state_proj = nn.Linear(config.num_joints, d)
        self.subtask_proj = nn.Linear(config.subtask_dim, d)
        if config.global_token:     # normalised first: the CLS token's scale moves while the ViT trains
            self.context = nn.Sequential(nn.LayerNorm(config.repr_dim), nn.Linear(config.repr_dim, d))
        else:
            self.context = None
        self.layers = nn.ModuleList([_DecoderLayer(config) for _ in range(config.num_layers)])
        self.ln_out = nn.LayerNorm(d)
        self.head = nn.Linear(d, config.num_joints)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    def prepare(self, representation: torch.Tensor) -> MemoryKV:
        """Representation [B, T, Dw] -> cached cross-attention K/V for every layer."""
        memory = self.mem_ln(self.mem_proj(representation))
        keys, values = [], []
        for layer in self.layers:
            k, v = layer.memory_kv(memory)
            keys.append(k)
            values.append(v)
        context = self.context(representation[:, 0]) if self.context is not None else None
        return MemoryKV(keys, values, context)

    def decode(self, kv: MemoryKV, joint_state: torch.Tensor, subtask: torch.Tensor) -> torch.Tensor:
        """joint_state [B, N], subtask [B, S] -> joint position targets [B, H, N]."""
        cond = self.state_proj(joint_state) + self.subtask_proj(subtask)
        if kv.context is not None:
            cond = cond + kv.context
        x = self.queries.unsqueeze(0) + cond.unsqueeze(1)
        for layer, k, v in zip(self.layers, kv.keys, kv.values):
            x = layer(x, k, v)
        delta = torch.tanh(self.head(self.ln_out(x))) * self._delta_scale(x)
        return joint_state.unsqueeze(1) + delta

    def _delta_scale(self, like: torch.Tensor) -> torch.Tensor:
        # Built from the config on first use, not a buffer: from_pretrained creates the
        # module without initialising buffers that are not in the weights file.
        s = self.__dict__.get('_scale')
        if s is None or s.dtype != like.dtype or s.device != like.device:
            s = torch.tensor(self.config.delta_scale, dtype=like.dtype, device=like.device)
            self.__dict__['_scale'] = s
        return s

    def forward(self, representation, joint_state, subtask):
        """Unified path (training, baseline): prepare + decode in one call."""
        return self.decode(self.prepare(representation), joint_state, subtask)


def load_action_expert(model_dir: str, precision: str = 'fp32', device: str = 'cpu'):
    """Verify the manifest, then load with from_pretrained. Returns (model, manifest)."""
    from .world_expert import DTYPES, resolve_precision
    manifest = verify_manifest(model_dir)
    model = ActionExpert.from_pretrained(model_dir, dtype=DTYPES[resolve_precision(precision)])
    model.eval().to(torch.device(device))
    return model, manifest
