"""The GPU path, measured on the device machine; or a dry run on the CPU.

    python3 bench/gpu.py [--device cuda|cpu] [--iters 200] [--quick] [--no-report]

ROS-free (the core only: the device machine has torch, transformers and CuPy, not ROS),
so it runs there with the machine's own ``python3`` from a checkout, without colcon:

    PYTHONPATH=src/wam_core:src/wam_system_tests:<a folder holding urdf_parser_py> \
        python3 bench/gpu.py

(``urdf_parser_py`` is pure Python: the device check carries it from this machine's
venv). It writes seeded models into a temporary directory and measures:

- encode p50/p99 at batch 1, 4 and 8 (observations of one 1-view frame each) for the
  default world expert (ViT, 4 layers, 192 wide, 128 px) and the realistic one
  (ViT-B/16, 224 px), bf16, CUDA graphs per batch size on a GPU;
- the action tick (prepare + decode + the chunk's copy to the host) p50/p99 with and
  without CUDA graphs, at the realistic size;
- a representation read across processes, ``cuda_ipc`` against ``shm`` in the same run
  (the reader in a fresh process reads the newest slot in place and re-checks it);
- the unified tick (the world expert inside every tick) against the split tick, p50;
- peak GPU memory against the card's total.

With ``--device cuda`` it writes the ``gpu`` section of bench/report.json (device, date,
figures). A CPU run prints the same table and writes nothing (``gpu`` figures are device
figures), unless ``--report-cpu`` asks it to write ``gpu_cpu_dry_run``. What a CPU
cannot measure (graphs, cuda_ipc) is printed as absent with the reason.
"""

from __future__ import annotations

import argparse
import datetime
import multiprocessing as mp
import os
import sys
import tempfile
import time

import numpy as np
import torch

from wam_core.models.contract import Observation

BATCHES = (1, 4, 8)
FP = 'ab' * 16


def percentiles(samples_ms) -> dict:
    a = np.asarray(samples_ms, dtype=np.float64)
    return {'p50': float(np.percentile(a, 50)), 'p99': float(np.percentile(a, 99))}


WARMUP = {'cuda': 50, 'cpu': 3}  # the design documents' 50 warm-up requests; a dry run: few


def timed(fn, iters: int, warmup: int) -> dict:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()  # every call ends with a host copy or a synchronise: wall time is device time
        out.append((time.perf_counter() - t0) * 1e3)
    return percentiles(out)


SIZES = {'default': 'tiny', 'vit_b16': 'base'}  # bench name -> default_models world size


def write_models(tmp: str, names) -> dict:
    """Only the pairs this run measures (a ViT-B/16 pair is ~350 MB of weights)."""
    from wam_core.models.default_models import write_default_models

    return {
        n: write_default_models(os.path.join(tmp, n), seed=0, world_size=SIZES[n]) for n in names
    }


def measure_encode(model_dir: str, device: str, iters: int, graphs: bool):
    from wam_core.models.world_expert import WorldExpert

    world = WorldExpert(model_dir, precision='bf16' if device != 'cpu' else 'auto', device=device)
    if graphs:
        world.enable_cuda_graphs(BATCHES)
    rng = np.random.default_rng(0)
    size = world.image_size
    frame = rng.integers(0, 255, size=(size, size, 3), dtype=np.uint8)
    obs = Observation({world.spec.view_names[0]: frame})
    out = {}
    warmup = WARMUP[torch.device(device).type]
    for b in BATCHES:
        batch = [obs] * b
        out[f'b{b}'] = timed(lambda batch=batch: world.encode_batch(batch), iters, warmup)
    return out, world, obs


def make_tick(model_dir: str, device: str, graphs: bool):
    """The action tick as the ticker runs it: prepare a representation, decode a chunk,
    copy it to the host (the tick's one wait for the device)."""
    from wam_core.models.action_expert import ObjectMlpExpert

    expert = ObjectMlpExpert(model_dir, precision='fp32', device=device)
    if graphs:
        expert.enable_cuda_graphs()
    cfg = expert.module.config
    joints = torch.zeros((1, cfg.num_joints), dtype=expert.dtype, device=expert.device)
    subtask = torch.zeros((1, cfg.subtask_dim), dtype=expert.dtype, device=expert.device)

    def tick(rep):
        with torch.inference_mode():
            rep = torch.as_tensor(rep, device=expert.device).to(expert.dtype).unsqueeze(0)
            scene = expert.prepare(rep)
            return expert.decode(scene, joints, subtask)[0].float().cpu().numpy()

    return tick


def _reader(backend: str, name: str, n: int, conn) -> None:
    """A fresh process: open the ring once, read the newest slot in place n times."""
    try:
        if backend == 'cuda_ipc':
            from wam_core.cache.cuda_ipc import CudaIpcRingReader as Reader
        else:
            from wam_core.cache.shm import ShmRingReader as Reader
        reader = Reader(name, ttl_ms=1e9)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            res = reader.latest('v1')
            ok = res.ok and res.still_valid()
            samples.append((time.perf_counter() - t0) * 1e3)
            if not ok:
                raise RuntimeError(f'read refused: {res.reason}')
        reader.close()
        conn.send(percentiles(samples))
    except Exception as exc:  # the parent reports it
        conn.send({'error': f'{type(exc).__name__}: {exc}'})


def measure_ipc_read(backend: str, shape, device: str, n: int) -> dict:
    from wam_core.cache.shm import ShmRingWriter

    name = f'wam_gpu_bench_{backend}_{os.getpid()}'
    if backend == 'cuda_ipc':
        from wam_core.cache.cuda_ipc import CudaIpcRingWriter

        writer = CudaIpcRingWriter(name, 8, shape, 'v1', device=torch.device(device).index or 0)
        writer.put(FP, time.time_ns(), torch.randn(shape, device=device))
    else:
        writer = ShmRingWriter(name, 8, shape, 'v1')
        writer.put(FP, time.time_ns(), np.random.default_rng(0).standard_normal(shape, np.float32))
    try:
        ctx = mp.get_context('spawn')  # a fresh process, as an action expert is
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_reader, args=(backend, name, n, child))
        proc.start()
        result = parent.recv() if parent.poll(120) else {'error': 'the reader did not answer'}
        proc.join(30)
        return result
    finally:
        writer.close()


def run(device: str, iters: int, quick: bool) -> dict:
    from wam_core.models.cuda_graphs import device_unavailable

    why = device_unavailable(device)
    if why:
        raise SystemExit(why)
    cuda = device != 'cpu'
    absent = '' if cuda else 'no CUDA device (CPU dry run)'
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    out: dict = {'device': torch.cuda.get_device_name() if cuda else 'cpu', 'absent': {}}
    out['date'] = datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')
    with tempfile.TemporaryDirectory() as tmp:
        names = ('default',) if quick else ('default', 'vit_b16')
        models = write_models(tmp, names)
        encode, worlds = {}, {}
        for name in names:
            print(f'encode: {name} ...', flush=True)
            encode[name], *worlds[name] = measure_encode(
                models[name]['world_dir'], device, iters, graphs=cuda
            )
        out['encode_ms'] = encode
        big = 'default' if quick else 'vit_b16'
        world, obs = worlds[big]
        # as the cache hands it to the tick: on the device (cuda_ipc), or in host memory
        rep = torch.as_tensor(world.encode_batch([obs], on_device=False)[0], device=device)
        warmup = WARMUP['cuda' if cuda else 'cpu']
        print(f'action tick at the {big} size ...', flush=True)
        ticks = {'eager': make_tick(models[big]['action_dir'], device, False)}
        if cuda:
            ticks['graphs'] = make_tick(models[big]['action_dir'], device, True)
        else:
            out['absent']['action_tick_ms.graphs'] = absent
        out['action_tick_ms'] = {
            k: timed(lambda t=t: t(rep), iters, warmup) for k, t in ticks.items()
        }
        best = 'graphs' if cuda else 'eager'
        # unified: the world expert inside every tick (the representation stays on the
        # device between the two); split: the tick alone, on a cached representation
        tick = ticks[best]
        unified = timed(lambda: tick(world.encode_batch([obs], on_device=cuda)[0]), iters, warmup)
        out['unified_tick_ms'] = unified
        print('representation reads across processes ...', flush=True)
        reads = {'shm': measure_ipc_read('shm', tuple(rep.shape), device, 2000)}
        if cuda:
            reads['cuda_ipc'] = measure_ipc_read('cuda_ipc', tuple(rep.shape), device, 2000)
        else:
            out['absent']['ipc_read_ms.cuda_ipc'] = absent
        out['ipc_read_ms'] = reads
        out['unified_over_split_p50'] = unified['p50'] / out['action_tick_ms'][best]['p50']
        out['model_for_ratio'] = big
    if cuda:
        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        out['peak_mem_fraction'] = torch.cuda.max_memory_allocated() / total
    else:
        out['absent']['peak_mem_fraction'] = absent
    return out


def print_table(r: dict) -> None:
    def f(d, key='p50'):
        return '-' if not d or 'error' in d else f'{d[key]:.3f}'

    print(f'\ndevice: {r["device"]} ({r["date"]})')
    for name, rows in r['encode_ms'].items():
        for b, d in rows.items():
            print(f'  encode {name:8s} {b:>3}: p50 {f(d)} / p99 {f(d, "p99")} ms')
    for kind, d in r['action_tick_ms'].items():
        print(f'  action tick {kind:7s}: p50 {f(d)} / p99 {f(d, "p99")} ms')
    for backend, d in r['ipc_read_ms'].items():
        err = f' ({d["error"]})' if 'error' in d else ''
        print(f'  read {backend:9s}: p50 {f(d)} / p99 {f(d, "p99")} ms{err}')
    print(
        f'  unified tick ({r["model_for_ratio"]}): p50 {f(r["unified_tick_ms"])} ms, '
        f'{r["unified_over_split_p50"]:.1f}x the split tick'
    )
    if 'peak_mem_fraction' in r:
        print(f'  peak GPU memory: {r["peak_mem_fraction"] * 100:.2f} % of the card')
    for key, why in r['absent'].items():
        print(f'  {key}: absent ({why})')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    ap.add_argument('--iters', type=int, default=None, help='timed calls (200 on cuda, 10 on cpu)')
    ap.add_argument('--quick', action='store_true', help='the default world expert only')
    ap.add_argument('--no-report', action='store_true', help='print only')
    ap.add_argument('--report-cpu', action='store_true', help='write a CPU run as gpu_cpu_dry_run')
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    iters = args.iters or (200 if args.device != 'cpu' else 10)
    result = run(args.device, iters, args.quick)
    result['seconds'] = round(time.monotonic() - t0, 1)
    print_table(result)
    if args.no_report:
        return 0
    cuda = args.device != 'cpu'
    if cuda or args.report_cpu:
        from wam_system_tests.report import update_report

        path = update_report('gpu' if cuda else 'gpu_cpu_dry_run', result)
        print(f'wrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
