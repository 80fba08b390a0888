"""Compute dtypes by name, what 'auto' means on this machine, and the world expert's int8."""

from __future__ import annotations

import warnings

import torch

DTYPES = {'bf16': torch.bfloat16, 'fp16': torch.float16, 'fp32': torch.float32}

# int8: a model's Linear weights stored as int8 (per tensor) and its activations quantized
# per forward (PyTorch's dynamic quantization, fbgemm / x86 kernels); the rest of the model
# (the patch convolution, attention, norms) stays fp32. CPU only. The ViT world expert
# offers it and takes it for 'auto' on a CPU: its representation ~2 % (relative norm) from
# fp32's, the same task success, the fastest encode here (docs/model.md).
INT8 = 'int8'
# torch 2.13 marks torch.ao.quantization and its quantized tensors deprecated (for
# torchao, whose CPU int8 path needs torch.compile); the pinned torch has them. Set once
# at import (not catch_warnings, which is not thread-safe: releases load on threads).
warnings.filterwarnings('ignore', message=r'torch\.ao\.quantization is deprecated')
warnings.filterwarnings('ignore', message=r'.*quantize_per_tensor.*deprecated')


def resolve_precision(precision: str, device: str = 'cpu', int8: bool = False) -> str:
    """'auto' -> bf16 on a CUDA device (the GPU baseline); on a CPU int8 for a model that
    offers it (``int8``) where torch has a quantized engine, else bf16 where the CPU
    computes it natively (AMX / AVX512-BF16), else fp32.

    On CPUs without bf16 units torch emulates it and a 4-layer ViT gets ~5x slower. On
    this project's AVX512-BF16 host the ViT's two-view encode took 5.8 ms at int8, 7.8 at
    bf16 and 10.5 at fp32, each as TorchScript (``python bench/world_forward.py``).
    """
    if precision == INT8 and device.startswith('cuda'):
        raise ValueError('precision int8 (dynamic quantization) runs on the CPU only')
    if precision != 'auto':
        return precision
    if device.startswith('cuda'):
        return 'bf16'
    if int8 and int8_engine():
        return INT8
    try:
        with open('/proc/cpuinfo', encoding='ascii', errors='ignore') as fh:
            flags = fh.read()
    except OSError:
        flags = ''
    return 'bf16' if ('amx_bf16' in flags or 'avx512_bf16' in flags) else 'fp32'


def int8_engine() -> str:
    """The quantized engine int8 runs on ('' where this torch build has none)."""
    engines = torch.backends.quantized.supported_engines
    return next((e for e in ('x86', 'fbgemm', 'onednn', 'qnnpack') if e in engines), '')


def float_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a floating-point precision, or why this model cannot run it."""
    try:
        return DTYPES[precision]
    except KeyError:
        raise ValueError(
            f'precision {precision!r}: this model runs auto, {", ".join(DTYPES)} '
            f'({INT8} is for the ViT world expert)'
        ) from None


def load_dtype(precision: str) -> torch.dtype:
    """The dtype a model's weights load in: int8 loads fp32 and is quantized after."""
    return torch.float32 if precision == INT8 else float_dtype(precision)


def quantize_linear_int8(model: torch.nn.Module) -> torch.nn.Module:
    """The model with every nn.Linear replaced by its dynamically quantized int8 twin."""
    engine = int8_engine()
    if not engine:
        raise ValueError('precision int8: this torch build has no quantized engine')
    torch.backends.quantized.engine = engine
    return torch.ao.quantization.quantize_dynamic(
        model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
    )
