"""Loading a π0 model directory: manifest first, then the serving block, the processor's
files and the checkpoint, keeping only the half an expert serves.

The world expert keeps the VLM (SigLIP, the projector, PaliGemma's Gemma), the action
expert the DiT and its action/time projections: each process holds its part (the base
configuration's VLM is ~2.9 B parameters, the action expert ~0.3 B plus an unused
token embedding). Loading goes through ``PI0ForConditionalGeneration.from_pretrained``,
so a LeRobot checkpoint's key names are converted as transformers converts them; the
whole checkpoint is in memory once while loading.
"""

from __future__ import annotations

import gc

import torch
from transformers import PI0ForConditionalGeneration

from ...common.quiet_loading import no_progress_bars
from ..contract import ContractError
from ..cuda_graphs import device_unavailable
from ..manifest import Manifest, verify_manifest
from ..precision import float_dtype, resolve_precision
from .serving import Pi0Serving, read_processor

REPRESENTATION_DTYPES = {
    torch.float32: 'float32',
    torch.bfloat16: 'bfloat16',
    torch.float16: 'float16',
}


def load_pi0(
    model_dir: str, precision: str, device: str, keep: str
) -> tuple[Manifest, Pi0Serving, dict, PI0ForConditionalGeneration]:
    """``keep``: 'vlm' (the world expert's half) or 'dit' (the action expert's)."""
    why = device_unavailable(device)
    if why:
        raise ContractError(why)
    manifest = verify_manifest(model_dir)  # refuse tampered weights before reading them
    serving = Pi0Serving.from_manifest(manifest.extra, repr(model_dir))
    processor = read_processor(model_dir)
    dtype = float_dtype(resolve_precision(precision, device))
    try:
        with no_progress_bars():
            model = PI0ForConditionalGeneration.from_pretrained(model_dir, dtype=dtype)
    except (OSError, ValueError) as exc:
        raise ContractError(f'{model_dir!r}: not a π0 checkpoint: {exc}') from None
    serving.check_model(model.config, repr(model_dir))
    if keep == 'vlm':
        del model.model.dit
        del model.embed_action_time
        del model.action_out_proj
    else:
        del model.model.vlm
    gc.collect()
    model.eval().to(torch.device(device))
    return manifest, serving, processor, model


def geometry(config) -> tuple[int, int, int]:
    """(layers, kv heads, head dim) of the VLM's cache, which the DiT must match."""
    text = config.vlm_config.text_config
    head_dim = getattr(text, 'head_dim', None) or text.hidden_size // text.num_attention_heads
    return int(text.num_hidden_layers), int(text.num_key_value_heads), int(head_dim)
