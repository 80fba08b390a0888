#!/usr/bin/env python3
"""π0 served split, measured on this machine -> the "pi0" section of bench/report.json.

    python bench/pi0.py [--sizes tiny,base] [--no-stack] [--no-fetch] [--quick]

For the tiny π0 (2.4 M parameters) and the base one (``lerobot/pi0_base``'s architecture,
3.5 B parameters, random weights, bf16), with one camera and with two:

- the world expert's prefix encode (SigLIP + projector + PaliGemma's Gemma over the
  images and a 48-token prompt) p50/p99, and the representation's bytes;
- the action expert's decode p50/p99 from a prepared prefix, at 10 flow-matching steps
  (the model's) and at 5;
- unified against split: ``sample_actions`` (prefix and 10 steps, what a server that
  recomputes the prefix per request runs every time) over the split decode, at p50;
- the prefix fetched across hosts through the Mooncake Store (a writer process on
  127.0.0.2, the reader here on 127.0.0.3, a real mooncake_master): descriptor -> tensor
  verified, p50/p99;
- the tiny π0 in the running stack (synthetic robot, one process and one per expert):
  chunk rate, decode p50/p99, late stamps, stale chunks, unsafe points, conformance.

The base model is big for a 2-core CPU: its figures come from few iterations (the report
says how many). Models are written once under models/pi0_bench/ (the base one is 7 GB).
One thread per process, as the nodes run.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

from wam_core.common.paths import workspace_root
from wam_core.models.contract import Observation
from wam_system_tests.report import read_report, update_report

HOME = [0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.04]
ITERS = {  # (encode, decode, unified): the base model takes seconds per call here
    'tiny': (100, 50, 30),
    'base': (4, 4, 3),
}
PRECISION = {  # (world, action), as config/wam.yaml would load them on this CPU
    'tiny': ('auto', 'fp32'),
    'base': ('bf16', 'bf16'),  # fp32 base is 14 GB a copy
}
VIEWS = {1: ('front',), 2: ('front', 'wrist')}


def cpu_model() -> str:
    """The CPU's name (bf16 speed differs a lot: AMX, AVX512-BF16 or neither)."""
    try:
        with open('/proc/cpuinfo', encoding='ascii', errors='ignore') as fh:
            info = fh.read()
    except OSError:
        return 'CPU'
    name = next(
        (
            line.split(':', 1)[1].strip()
            for line in info.splitlines()
            if line.startswith('model name')
        ),
        'CPU',
    )
    units = [u for u in ('amx_bf16', 'avx512_bf16') if u in info]
    return f'{name} ({", ".join(units) or "no bf16 units"})'


def percentiles(samples) -> dict:
    a = np.asarray(samples, dtype=np.float64)
    return {'p50': float(np.percentile(a, 50)), 'p99': float(np.percentile(a, 99))}


def timed(fn, iters: int, warmup: int = 2) -> dict:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return {**percentiles(out), 'iters': iters}


def model_dirs(root: str, size: str) -> dict[int, str]:
    """The seeded model of ``size`` with one camera, and the same weights (hard links)
    served with two: only the manifest's views differ."""
    from wam_core.models.pi0.write import seal, serving_block, write_pi0

    one, two = os.path.join(root, f'{size}_1v'), os.path.join(root, f'{size}_2v')
    if not os.path.exists(os.path.join(one, 'manifest.json')):
        shutil.rmtree(one, ignore_errors=True)
        write_pi0(one, size, VIEWS[1])
    if not os.path.exists(os.path.join(two, 'manifest.json')):
        shutil.rmtree(two, ignore_errors=True)
        os.makedirs(two)
        for name in os.listdir(one):
            if name != 'manifest.json':
                os.link(os.path.join(one, name), os.path.join(two, name))
        version = f'pi0-{size}-front+wrist-seed0'
        seal(two, serving_block(list(VIEWS[2])), f'pi0-{size}-front+wrist', version, False)
    return {1: one, 2: two}


def observation(world, seed: int = 0) -> Observation:
    rng = np.random.default_rng(seed)
    views = {v: rng.integers(0, 256, (128, 128, 3), dtype=np.uint8) for v in world.spec.view_names}
    return Observation(views, time.time_ns(), prompt='put the red apple in the fridge')


def _world(model_dir: str, precision: str, iters: int):
    """Encode figures, and what the other measurements take from the world expert (it is
    released on return: a base VLM is ~6 GB)."""
    from wam_core.models.pi0.world import Pi0WorldExpert

    world = Pi0WorldExpert(model_dir, precision)
    obs = observation(world)
    rep = world.encode(obs)
    return timed(lambda: world.encode(obs), iters, 1), rep, world.inputs([obs]), world.spec


def _action(model_dir: str, precision: str, rep, spec, iters: int):
    """Decode figures at 10 and 5 steps from one prepared prefix; the state and noise."""
    from wam_core.models.pi0.action import Pi0ActionExpert
    from wam_core.serving.action_ticker import representation_tensor

    action = Pi0ActionExpert(model_dir, precision)
    ctx = action.prepare(representation_tensor(rep, spec.dtype)[None])
    q = torch.tensor([HOME], dtype=action.dtype)
    decode = timed(lambda: action.decode(ctx, q), iters, 1)
    action.num_steps = 5
    decode5 = timed(lambda: action.decode(ctx, q), iters, 1)
    return decode, decode5, action.model_state(q), action.noise


def _unified(model_dir: str, precision: str, inputs, state, noise, iters: int) -> dict:
    """``sample_actions`` of the whole model: the prefix and the 10 steps every time."""
    from transformers import PI0ForConditionalGeneration

    dtype = torch.bfloat16 if precision == 'bf16' else torch.float32
    full = PI0ForConditionalGeneration.from_pretrained(model_dir, dtype=dtype).eval()
    args = {**inputs, 'pixel_values': inputs['pixel_values'].to(dtype)}

    def call():
        with torch.inference_mode():
            full.sample_actions(state=state, noise=noise, **args)

    return timed(call, iters, 1)


def measure_model(model_dir: str, size: str, quick: bool) -> dict:
    """Encode, decode at 10 and 5 steps, unified, for one directory (one camera count);
    one model part in memory at a time."""
    n_enc, n_dec, n_uni = ITERS[size]
    if quick:
        n_enc, n_dec, n_uni = max(2, n_enc // 10), max(2, n_dec // 10), max(1, n_uni // 10)
    wp, ap = PRECISION[size]
    encode, rep, inputs, spec = _world(model_dir, wp, n_enc)
    gc.collect()
    decode, decode5, state, noise = _action(model_dir, ap, rep, spec, n_dec)
    gc.collect()
    unified = _unified(model_dir, ap, inputs, state, noise, n_uni)
    gc.collect()
    return {
        'precision': {'world': wp, 'action': ap, 'representation': spec.dtype},
        'representation_shape': list(spec.shape),
        'repr_bytes': spec.nbytes,
        'encode_ms': encode,
        'decode_ms': decode,  # the model's 10 steps
        'decode_ms_by_steps': {'10': decode, '5': decode5},
        'unified_ms': unified,
        'unified_over_split_p50': unified['p50'] / decode['p50'],
    }


# --------------------------------------------------------------- across hosts
WORLD_HOST, ROBOT_HOST = '127.0.0.2', '127.0.0.3'


def _writer(cfg, shape, dtype: str, n: int, q_out, q_go) -> None:
    """The world host: n representations of ``shape`` put into the store, one at a time
    (the next once the reader has fetched the last), each announced like a descriptor."""
    from wam_core.cache.mooncake import MooncakeWriter
    from wam_core.cache.protocol import storage_dtype

    w = MooncakeWriter(cfg, 'v1', shape, robot='robot1', capacity=4)
    rng = np.random.default_rng(0)
    stored = storage_dtype(dtype)
    for i in range(n):
        words = rng.integers(0, 1 << 14, shape).astype(stored)
        e = w.put(f'{i:032x}', time.time_ns(), words, dtype)
        q_out.put((w.object_of(e), e.key, e.version, e.stamp_ns, e.checksum))
        q_go.get(timeout=60)
    w.close()


def measure_fetch(shape, dtype: str, n: int) -> dict:
    from wam_core.cache.mooncake import MooncakeReader, RemoteRepresentation
    from wam_core.cache.mooncake_master import MooncakeMaster
    from wam_core.cache.protocol import storage_dtype
    from wam_core.common.process import free_port

    nbytes = int(np.prod(shape)) * storage_dtype(dtype).itemsize
    segment_mb = max(64, 8 * nbytes // (1 << 20))
    master = MooncakeMaster(WORLD_HOST, free_port(WORLD_HOST), free_port(WORLD_HOST)).start()
    try:
        master.wait_ready(30)
        cfg = master.client_config(
            WORLD_HOST,
            ROBOT_HOST,
            global_segment_mb=segment_mb,
            local_buffer_mb=max(16, 2 * nbytes // (1 << 20)),
        )
        ctx = mp.get_context('spawn')
        q_out, q_go = ctx.Queue(), ctx.Queue()
        proc = ctx.Process(target=_writer, args=(cfg, shape, dtype, n, q_out, q_go), daemon=True)
        proc.start()
        reader = MooncakeReader(cfg, ttl_ms=60_000.0, robot='robot1')
        done, samples = [], []
        reader.on_ready = done.append
        reader.on_fetch_ms = samples.append
        try:
            for _ in range(n):
                name, key, version, stamp, crc = q_out.get(timeout=60)
                reader.prefetch(
                    RemoteRepresentation(name, key, version, stamp, shape, dtype, crc, 1)
                )
                end = time.monotonic() + 30
                k = len(done)
                while len(done) == k and time.monotonic() < end and not reader.fetch_refused:
                    time.sleep(0.0005)
                if reader.fetch_refused:
                    raise RuntimeError(f'fetch refused: {reader.fetch_refused}')
                q_go.put(None)
        finally:
            reader.close()
            proc.join(timeout=30)
        return {**percentiles(samples), 'fetches': len(samples), 'bytes': nbytes}
    finally:
        master.stop()


# --------------------------------------------------------------- the running stack
def measure_stack(mode: str, model_dir: str, version: str, seconds: float) -> dict:
    import yaml

    from robot_agent.stack import Stack
    from wam_core.cache.freshness import expected_ttl_ms, stale_bound_s
    from wam_core.common.config import ActionExpertParams, WorldExpertParams
    from wam_core.common.params import load_params
    from wam_core.common.paths import default_config
    from wam_core.control.limits import ClampGate
    from wam_system_tests.fault_recorder import Recorder
    from wam_util import convert

    os.environ['ROS_DOMAIN_ID'] = str(100 + os.getpid() % 100)
    with open(os.path.join(workspace_root(), 'config', 'pi0.yaml'), encoding='utf-8') as fh:
        doc = yaml.safe_load(fh)
    for node in ('/**/world_expert', '/**/action_expert'):
        doc[node]['ros__parameters']['model_dir'] = model_dir
    tmp = tempfile.mkdtemp(prefix='pi0_bench_')
    overlay = os.path.join(tmp, 'pi0.yaml')
    with open(overlay, 'w', encoding='utf-8') as fh:
        yaml.safe_dump(doc, fh)
    config = default_config()
    cfg = load_params([config, overlay], 'action_expert', ActionExpertParams)
    limits = ClampGate(cfg.robot.joint_names, cfg.joint_limits, cfg.control.period_s)
    stack = Stack(mode, config, overlays=[overlay])
    world = load_params([config, overlay], 'world_expert', WorldExpertParams)
    stale_s = stale_bound_s(expected_ttl_ms(world, cfg), cfg.control.period_s)
    rec = Recorder(stack, version, stale_s, limits)
    if mode == 'multi':
        rec.watch_cache('wam_repr')
    try:
        stack.wait_ready(120)
        stack.spin_for(3.0)
        m = stack.monitor
        c0, t0, ticks0 = m.chunks, time.monotonic(), m.action.ticks
        stack.spin_for(seconds)
        elapsed = time.monotonic() - t0
        stack.spin_for(1.2)
        a, w = m.action, m.world
        decode = convert.latency_of(a.latency, 'decode')
        return {
            'seconds': round(elapsed, 1),
            'decode_mode': a.decode_mode,
            'chunk_hz': (m.chunks - c0) / elapsed,
            'expected_chunk_hz': a.expected_chunk_hz,
            'decode_ms': {'p50': decode.p50_ms, 'p99': decode.p99_ms},
            'encode_ms': {
                'p50': convert.latency_of(w.latency, 'encode').p50_ms,
                'p99': convert.latency_of(w.latency, 'encode').p99_ms,
            },
            'ticks': int(a.ticks - ticks0),
            'degraded': convert.counts_of(a.degraded),
            'world_calls_per_frame': w.calls_per_distinct_frame,
            'late_stamps': int(a.late_stamps),
            'stale_chunks': sum(1 for t, n, s in rec.forwarded if n > 1 and rec.stale(s, t)),
            'unsafe_points': rec.unsafe,
            'conformance_violations': rec.conformance_all.total,
            'forwarded': len(rec.forwarded),
        }
    finally:
        stack.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--sizes', default='tiny,base')
    ap.add_argument('--no-stack', action='store_true')
    ap.add_argument('--no-fetch', action='store_true')
    ap.add_argument('--quick', action='store_true', help='a tenth of the iterations')
    ap.add_argument('--stack-seconds', type=float, default=20.0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    root = os.path.join(workspace_root(), 'models', 'pi0_bench')
    section: dict = {
        'date': datetime.date.today().isoformat(),
        'command': 'python bench/pi0.py ' + ' '.join(argv if argv is not None else sys.argv[1:]),
        'machine': f'{cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, '
        'one thread a process',
    }
    sizes = [s for s in args.sizes.split(',') if s]
    for size in sizes:
        dirs = model_dirs(root, size)
        for views, d in dirs.items():
            print(f'[pi0] {size}, {views} camera(s): encode, decode, unified ...', flush=True)
            fig = measure_model(d, size, args.quick)
            section.setdefault(size, {})[f'{views}v'] = fig
            print(
                f'[pi0] {size} {views}v: encode {fig["encode_ms"]["p50"]:.1f}/'
                f'{fig["encode_ms"]["p99"]:.1f} ms, decode(10) {fig["decode_ms"]["p50"]:.1f}/'
                f'{fig["decode_ms"]["p99"]:.1f} ms, decode(5) '
                f'{fig["decode_ms_by_steps"]["5"]["p50"]:.1f}/'
                f'{fig["decode_ms_by_steps"]["5"]["p99"]:.1f} ms, unified '
                f'{fig["unified_ms"]["p50"]:.1f} ms = {fig["unified_over_split_p50"]:.2f}x '
                f'the split decode, representation {fig["repr_bytes"] / 1e6:.2f} MB',
                flush=True,
            )
        if not args.no_fetch:
            fig = section[size]['1v']
            shape, dtype = tuple(fig['representation_shape']), fig['precision']['representation']
            n = 30 if size == 'base' else 100
            print(f'[pi0] {size}: the prefix across hosts ({n} fetches) ...', flush=True)
            fetch = measure_fetch(shape, dtype, max(5, n // 10) if args.quick else n)
            section[size]['fetch_ms'] = {'mooncake': fetch}
            print(
                f'[pi0] {size}: Mooncake fetch of {fetch["bytes"] / 1e6:.2f} MB p50/p99 '
                f'{fetch["p50"]:.2f}/{fetch["p99"]:.2f} ms',
                flush=True,
            )
    if not args.no_stack and 'tiny' in sizes:
        dirs = model_dirs(root, 'tiny')
        from wam_core.models.manifest import read_manifest

        version = read_manifest(dirs[2]).version
        stack = {}
        for mode in ('single', 'multi'):
            print(f'[pi0] tiny, two cameras, in the {mode}-process stack ...', flush=True)
            stack[mode] = measure_stack(mode, dirs[2], version, args.stack_seconds)
            s = stack[mode]
            print(
                f'[pi0] stack {mode}: {s["chunk_hz"]:.1f} chunks/s, decode p50/p99 '
                f'{s["decode_ms"]["p50"]:.1f}/{s["decode_ms"]["p99"]:.1f} ms, late '
                f'{s["late_stamps"]}, stale {s["stale_chunks"]}, unsafe {s["unsafe_points"]}, '
                f'conformance {s["conformance_violations"]}, degraded {s["degraded"]}',
                flush=True,
            )
        section['tiny']['stack'] = {**stack, 'chunk_hz': stack['single']['chunk_hz']}
    for size in sizes:  # each size says when and how it was measured
        section[size].update({k: section[k] for k in ('date', 'command', 'machine')})
    merged = {**read_report().get('pi0', {}), **section}  # a run of one size keeps the other
    print(f'\nwrote {update_report("pi0", merged)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
