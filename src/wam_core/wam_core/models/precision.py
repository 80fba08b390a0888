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


def resolve_precision(precision: str, device: str = 'cpu', int8: bool = False) -> str:
    """'auto' -> bf16 on a CUDA device (the GPU baseline); on a CPU int8 for a model that
    offers it (``int8``), else bf16 where the CPU computes it natively (AMX /
    AVX512-BF16), else fp32.

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
    if int8:
        return INT8
    try:
        with open('/proc/cpuinfo', encoding='ascii', errors='ignore') as fh:
            flags = fh.read()
    except OSError:
        flags = ''
    return 'bf16' if ('amx_bf16' in flags or 'avx512_bf16' in flags) else 'fp32'


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
    if 'x86' in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = 'x86'
    with warnings.catch_warnings():
        # torch 2.13 marks torch.ao.quantization and its quantized tensors deprecated
        # (for torchao, whose CPU int8 path needs torch.compile); the pinned torch has them
        warnings.simplefilter('ignore')
        return torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True
        )
