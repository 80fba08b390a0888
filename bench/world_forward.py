#!/usr/bin/env python3
"""The world expert's forward on this CPU: precision x eager / TorchScript x what else
runs in the process.

    python bench/world_forward.py [--iters 150] [--precisions fp32,bf16,int8]

The shipped two-view ViT, one observation per encode (two frames), one torch thread as
the node runs it. Each variant is measured idle and beside one Python thread that never
sleeps, at the GIL switch interval of the world node's process (0.1 ms) and of the
one-process stack (0.5 ms): what the node's callbacks, the tick and the simulator do to
an encode that needs the GIL between its ops (``wam_core.models.torchscript``). Writes
the ``world_forward`` section of bench/report.json and prints a table with the ratio of
each p50 to eager fp32 idle.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np
import torch

from wam_core.common.paths import resolve_path
from wam_core.models.contract import Observation
from wam_core.models.world_expert import WorldExpert
from wam_core.serving.interpreter import GIL_SWITCH_INTERVAL_S, SHARED_PROCESS_SWITCH_INTERVAL_S
from wam_system_tests.report import update_report


class BusyPythonThread:
    """A thread that runs Python without pause: it wants the GIL all the time."""

    def __init__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            sum(i * i for i in range(200))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def encode_ms(world: WorldExpert, obs: Observation, iters: int) -> dict:
    for _ in range(10):
        world.encode(obs)
    ms = []
    for _ in range(iters):
        t = time.perf_counter()
        world.encode(obs)
        ms.append((time.perf_counter() - t) * 1e3)
        time.sleep(0.01)  # a camera's pace, not a tight loop
    return {'p50': float(np.percentile(ms, 50)), 'p99': float(np.percentile(ms, 99))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--iters', type=int, default=150)
    ap.add_argument('--precisions', default='fp32,bf16,int8')
    ap.add_argument('--model-dir', default='models/world_expert')
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    loads = {
        'idle': None,
        'busy_0.1ms': GIL_SWITCH_INTERVAL_S,
        'busy_0.5ms': SHARED_PROCESS_SWITCH_INTERVAL_S,
    }
    figures: dict[str, dict] = {}
    before = sys.getswitchinterval()
    try:
        for precision in [p.strip() for p in args.precisions.split(',') if p.strip()]:
            world = WorldExpert(resolve_path(args.model_dir), precision=precision)
            rng = np.random.default_rng(0)
            obs = Observation(
                {
                    v: rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)
                    for v in world.spec.view_names
                }
            )
            for forward in ('eager', 'torchscript'):
                if forward == 'torchscript':
                    why = world.enable_torchscript((1,))
                    if why:
                        print(f'{precision}: no TorchScript ({why})', file=sys.stderr)
                        continue
                for load, interval in loads.items():
                    sys.setswitchinterval(interval or before)
                    if interval is None:
                        got = encode_ms(world, obs, args.iters)
                    else:
                        with BusyPythonThread():
                            got = encode_ms(world, obs, args.iters)
                    name = f'{precision}.{forward}.{load}'
                    figures[name] = got
                    print(f'  {name:32} p50 {got["p50"]:6.2f}  p99 {got["p99"]:6.2f}', flush=True)
    finally:
        sys.setswitchinterval(before)
    base = figures.get('fp32.eager.idle', next(iter(figures.values())))['p50']
    print(f'\n{"variant":34}{"p50 ms":>8}{"p99 ms":>8}{"p50 / fp32 eager idle":>24}')
    for name, f in figures.items():
        print(f'{name:34}{f["p50"]:8.2f}{f["p99"]:8.2f}{f["p50"] / base:24.2f}')
    path = update_report(
        'world_forward',
        {
            'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
            'views': len(world.spec.views),
            'iters': args.iters,
            'encode_ms': figures,
        },
    )
    print(f'\nwrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
