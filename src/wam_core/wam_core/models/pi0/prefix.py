"""π0's prefix key/value cache as one tensor, and as a cache its action expert only reads.

The VLM's prefix cache is, per layer, keys and values [B, kv_heads, P, head_dim], plus
the prefix's attention mask [B, P] (padding of the prompt). A representation cache holds
one tensor per observation, so the world expert packs them as planes::

    [2 * layers * kv_heads + 1, P, head_dim]
    plane 2*l*H + h:      layer l's keys of head h
    plane 2*l*H + H + h:  layer l's values of head h
    last plane, column 0: the attention mask (1.0 or 0.0)

The action expert's denoising steps append the suffix's keys to a ``DynamicCache`` and
``sample_actions`` crops them off again: the cache is written during a step. A
representation read from shared memory, CUDA IPC or a fetched Mooncake object must never
be. :class:`ReadOnlyPrefixCache` attends to the prefix without writing anything: a
layer's ``update`` returns prefix + the new keys in a fresh tensor and keeps nothing, so
every step, and every tick, sees the same prefix and no crop is needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


def planes(layers: int, kv_heads: int) -> int:
    return 2 * layers * kv_heads + 1


def pack_prefix(cache, attention_mask: torch.Tensor) -> torch.Tensor:
    """A VLM's prefix cache (``DynamicCache``) and its [B, P] mask -> [B, planes, P, D]."""
    layers = cache.layers
    b, h, p, d = layers[0].keys.shape
    out = layers[0].keys.new_zeros((b, planes(len(layers), h), p, d))
    for i, layer in enumerate(layers):
        out[:, 2 * i * h : 2 * i * h + h] = layer.keys
        out[:, 2 * i * h + h : 2 * i * h + 2 * h] = layer.values
    out[:, -1, :, 0] = attention_mask.to(out.dtype)
    return out


@dataclass
class Pi0Prefix:
    """An action expert's context: per layer keys and values [1, H, P, D] and the prefix
    mask [1, P], views into one private copy of a representation."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    mask: torch.Tensor
    storage: torch.Tensor  # the private copy the views look into

    @classmethod
    def unpack(cls, rep: torch.Tensor, kv_heads: int) -> Pi0Prefix:
        """[1, planes, P, D] (already private: see ``Pi0ActionExpert.prepare``)."""
        n = (rep.shape[1] - 1) // (2 * kv_heads)
        h = kv_heads
        keys = [rep[:, 2 * i * h : 2 * i * h + h] for i in range(n)]
        values = [rep[:, 2 * i * h + h : 2 * i * h + 2 * h] for i in range(n)]
        mask = (rep[:, -1, :, 0] > 0.5).long()
        return cls(keys, values, mask, rep)

    def cache(self) -> ReadOnlyPrefixCache:
        return ReadOnlyPrefixCache(self.keys, self.values)


class _ReadOnlyPrefixLayer(DynamicLayer):
    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        super().__init__()
        self.lazy_initialization(keys, values)
        self.keys, self.values = keys, values

    def update(self, key_states, value_states, *args, **kwargs):
        return (
            torch.cat([self.keys, key_states], dim=-2),
            torch.cat([self.values, value_states], dim=-2),
        )

    def crop(self, tokens_to_remove: int) -> None:  # nothing was kept, nothing to remove
        return None


class ReadOnlyPrefixCache(DynamicCache):
    """A ``DynamicCache`` over a fixed prefix that no forward pass can change."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor]):
        Cache.__init__(
            self, layers=[_ReadOnlyPrefixLayer(k, v) for k, v in zip(keys, values, strict=True)]
        )
