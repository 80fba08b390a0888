"""A fixed-shape forward captured once as a CUDA graph and replayed on every call.

A small model's forward on a GPU is dominated by launching its kernels one by one from
Python (tens of microseconds each); a CUDA graph launches the whole recorded sequence
at once. The graph reads from and writes to the buffers it was captured with, so a call
copies its inputs into the static input buffers, replays, and returns the static
outputs: **they are overwritten by the next call**; a caller that keeps a result copies
it (the experts' outputs are copied to the host or into the cache before the next call).

Capture follows torch's recipe: a few eager runs on a side stream (allocations, cuDNN
and cuBLAS choices settle), then the capture. Everything inside must be capture-safe: no
host synchronisation, no tensor made from Python values (the experts build their
constants before capturing). Not run on this machine (no CUDA device); on the CPU,
``GraphedCall`` refuses with the reason and the experts run eagerly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch


class GraphedCall:
    def __init__(
        self, fn: Callable[..., object], example_inputs: Sequence[torch.Tensor], warmup: int = 3
    ):
        if not example_inputs or not all(t.is_cuda for t in example_inputs):
            raise ValueError('CUDA graphs need CUDA tensors: set the expert device to cuda')
        self.static_inputs = [t.detach().clone() for t in example_inputs]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(max(1, warmup)):
                fn(*self.static_inputs)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.inference_mode():
            self.static_output = fn(*self.static_inputs)
        self.replays = 0

    def __call__(self, *inputs: torch.Tensor):
        if len(inputs) != len(self.static_inputs):
            raise ValueError(f'{len(self.static_inputs)} inputs expected, got {len(inputs)}')
        for static, x in zip(self.static_inputs, inputs, strict=True):
            if x.shape != static.shape:
                raise ValueError(f'captured for shape {tuple(static.shape)}, got {tuple(x.shape)}')
            if x.data_ptr() != static.data_ptr():
                static.copy_(x, non_blocking=True)
        self.graph.replay()
        self.replays += 1
        return self.static_output


def device_unavailable(device: str) -> str:
    """Why ``device`` cannot be used here ('' if it can): 'cuda' or 'cuda:N' needs CUDA."""
    dev = torch.device(device)
    if dev.type == 'cpu':
        return ''
    if dev.type != 'cuda':
        return f'device {device!r}: only cpu and cuda are supported'
    if not torch.cuda.is_available():
        return f'device {device!r}: no CUDA device (torch.cuda.is_available() is False)'
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        return f'device {device!r}: this machine has {torch.cuda.device_count()} CUDA devices'
    return ''
