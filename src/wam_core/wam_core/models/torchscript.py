"""A CPU forward traced and frozen as a TorchScript graph, so it runs without the GIL.

An eager forward of the shipped ViT is ~150 small torch ops, each called from Python: the
calling thread takes the GIL back between two ops. In a process whose other threads run
Python (the executor's callbacks, and in the one-process demo the 50 Hz tick and the
simulator) every op may wait a switch interval: a two-view encode took 60-69 ms p50 beside
one busy Python thread at the one-process stack's 0.5 ms interval, against 7-12 ms idle
(``python bench/world_forward.py``, 2026-12-07, docs/model.md). A traced graph runs its ops in the
TorchScript interpreter, which holds no GIL during the call. What is left to Python is
what surrounds the graph, so ``frames_graph`` takes the camera's bytes (uint8 [N, H, W,
3]) and returns the float32 representation: the normalisation and the cast are inside.

Tracing records one input shape's path; the caller keeps a graph per shape it sends (the
world expert: per frames per forward). ``torch.jit`` is deprecated in favour of
``torch.compile`` / ``torch.export``, which compile C++ at start-up (a compiler and
minutes on a 2-core host); the pinned torch 2.13 ships it. A trace that fails, or whose
output differs from the eager forward, leaves the caller eager (``None`` and the reason).
"""

from __future__ import annotations

import warnings

import torch

# What tracing says and this module knows: the ViT's shape checks and constants are
# recorded as constants (each graph serves one input shape), and the API is deprecated.
# Filters set once at import, not around each trace: warnings.catch_warnings swaps
# process-wide state and is not safe on the release-load threads that also trace.
warnings.filterwarnings('ignore', category=torch.jit.TracerWarning)
warnings.filterwarnings('ignore', message=r'`torch\.jit\.\w+` is deprecated')
warnings.filterwarnings('ignore', message=r'`is_gradient_checkpointing` is deprecated')


class _LastHiddenState(torch.nn.Module):
    """A transformers vision model as a normalised pixels -> float32 tensor function."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixel_values).last_hidden_state.float()


class _FramesToHiddenState(torch.nn.Module):
    """RGB uint8 frames [N, H, W, 3] at the model's size -> float32 last hidden state:
    the preprocessing's normalisation (x * scale + shift, then the model's dtype) inside."""

    def __init__(self, model: torch.nn.Module, scale, shift, dtype: torch.dtype):
        super().__init__()
        self.inner = _LastHiddenState(model)
        self.register_buffer('scale', scale.reshape(1, 3, 1, 1).float())
        self.register_buffer('shift', shift.reshape(1, 3, 1, 1).float())
        self.dtype = dtype

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        pixels = frames.permute(0, 3, 1, 2).float() * self.scale + self.shift
        return self.inner(pixels.to(self.dtype))


def _trace(module: torch.nn.Module, example: torch.Tensor):
    if example.is_cuda:
        return None, 'TorchScript is for the CPU forward (a GPU captures CUDA graphs)'
    try:
        with torch.no_grad():
            module = module.eval()
            graph = torch.jit.freeze(torch.jit.trace(module, example, check_trace=False))
            with torch.inference_mode():
                eager, traced = module(example), graph(example)
    except Exception as exc:  # whatever the tracer raises, the model stays usable eagerly
        return None, f'{type(exc).__name__}: {exc}'
    if traced.shape != eager.shape or not torch.allclose(traced, eager, rtol=1e-3, atol=1e-4):
        return None, 'the traced forward differs from the eager one'
    return graph, ''


def frames_graph(model, scale, shift, dtype, example: torch.Tensor):
    """``model``'s float32 last hidden state for uint8 frames shaped as ``example`` ([N,
    H, W, 3], the model's size), normalised as ``(x * scale + shift).to(dtype)`` inside,
    as a frozen graph checked against the eager forward; (None, why) when that fails."""
    return _trace(_FramesToHiddenState(model, scale, shift, dtype), example)
