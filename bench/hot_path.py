#!/usr/bin/env python3
"""Hot-path benchmark: the stack on the synthetic robot, 30 camera frames/s.

    python bench/hot_path.py [--seconds 30] [--modes multi,single] [--no-one-view]

For each mode it runs the stack for --seconds after bring-up and reads the figures
the nodes publish on /diagnostics (what rqt shows): the shipped pair, which sees two
camera views (front and wrist: the synthetic robot's two cameras, encoded together in
one forward). Then the multi-process stack once more with a seeded one-view pair on
the front camera alone, ``one_view`` in the report: what the second view costs. Then,
in this process, the
baseline: a *unified* tick that recomputes the world expert inside every 50 Hz
tick (encode + prepare + decode), paced at the same period, so the ratio shows what
the split buys. Writes the "hot_path" section of bench/report.json (other sections
are kept) and prints a table. The headline is the multi-process (shared-memory) run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from robot_agent.stack import Stack
from wam_core.common.paths import default_config, workspace_root
from wam_system_tests.report import update_report


def start_bare_timer(seconds: float) -> subprocess.Popen:
    """A bare rclpy timer in its own process, beside the stack: the machine's limit."""
    return subprocess.Popen(
        [sys.executable, '-m', 'wam_system_tests.bare_timer', '--seconds', str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )


def run_mode(mode: str, seconds: float, config: str, extra_args=None, tag: str = '') -> dict:
    stack = Stack(mode, config, camera_hz=30.0, extra_args=extra_args)
    tag = tag or mode
    try:
        stack.wait_ready(120)
        before = stack.stats()
        bare = start_bare_timer(seconds)
        t0 = time.monotonic()
        stack.spin_for(
            seconds,
            lambda s: print(
                f'  [{tag} {time.monotonic() - t0:4.0f}s] '
                f'tick p99 {s.stats()["tick_p99"]:.2f} ms, '
                f'period p99 {s.stats()["period_p99"]:.2f} ms',
                flush=True,
            ),
            5.0,
        )
        stack.spin_for(1.2)  # one more diagnostics round
        after = stack.stats()
        bare_out, _ = bare.communicate(timeout=30)
        bare_timer = json.loads(bare_out.strip().splitlines()[-1])
        series = {'period_ms': stack.monitor.arrival.values().round(3).tolist()}
        if stack.action is not None:  # single process: the tick samples are in this process
            series['tick_ms'] = stack.action.timer_stats.stages['tick'].values().round(3).tolist()
        with open(os.path.join(workspace_root(), 'bench', f'series_{tag}.json'), 'w') as fh:
            json.dump(series, fh)
    finally:
        stack.shutdown()
    frames = after['frames'] - before['frames']
    return {
        'tick_ms': {'p50': after['tick_p50'], 'p99': after['tick_p99'], 'max': after['tick_max']},
        'forward_ms': {'p50': after['forward_p50'], 'p99': after['forward_p99']},
        'period_ms': {
            'p50': after['period_p50'],
            'p99': after['period_p99'],
            'max': after['period_max'],
        },
        'bare_timer_period_ms': bare_timer,
        'open_loop_ticks': int(after['open_loop_ticks'] - before['open_loop_ticks']),
        'held_ticks': int(after['held_ticks'] - before['held_ticks']),
        'conformance_violations': int(after['conformance_violations']),
        'world_calls_per_frame': after['calls_per_frame'],
        'cache_hit_rate': after['cache_hit_rate'],
        'degraded_ticks': int(after['degraded_ticks'] - before['degraded_ticks']),
        'ticks': int(after['ticks'] - before['ticks']),
        'camera_frames': int(frames),
        'encode_ms_p50': after['encode_p50'],
        # per observation (all its views, one forward pass)
        'encode_ms': {'p50': after['encode_p50'], 'p99': after['encode_p99']},
        'views': list(stack.monitor.world.views) if stack.monitor.world is not None else [],
        'seconds': seconds,
    }


def one_view_args(tmp: str) -> list[str]:
    """The stack on one view: a seeded one-view pair and the robot's front camera only."""
    from robot_agent.stack import override
    from wam_core.models.default_models import write_default_models

    info = write_default_models(tmp, views=('front',))
    return [
        *override('world_expert', 'model_dir', info['world_dir']),
        *override('action_expert', 'model_dir', info['action_dir']),
        '-p',
        'synthetic_robot:cameras:=[front]',
    ]


def unified_baseline(config: str, ticks: int = 300) -> dict:
    """World expert recomputed inside every tick, paced at the control period."""
    import torch

    from wam_core.common.config import ActionExpertParams, WorldExpertParams
    from wam_core.common.params import load_params
    from wam_core.common.paths import resolve_path
    from wam_core.models.contract import Observation
    from wam_core.models.registry import (
        enable_torchscript,
        load_action_expert,
        load_world_expert,
    )
    from wam_sim.synthetic import SyntheticScene

    wcfg = load_params(config, 'world_expert', WorldExpertParams)
    acfg = load_params(config, 'action_expert', ActionExpertParams)
    torch.set_num_threads(wcfg.num_threads)
    world = load_world_expert(resolve_path(wcfg.model_dir), wcfg.precision)
    if wcfg.traces_forward:  # the baseline's encode as the node runs it
        enable_torchscript(world, (1,))
    action = load_action_expert(resolve_path(acfg.model_dir), acfg.precision)
    scene = SyntheticScene(128)
    joint = torch.zeros(1, len(action.spec.joint_names), dtype=action.dtype)
    subtask = torch.zeros(1, action.spec.conditioning_dim, dtype=action.dtype)
    views = world.spec.view_names
    world.warmup(20)
    period = acfg.control.period_s
    samples = []
    nxt = time.perf_counter()
    with torch.inference_mode():
        for i in range(ticks):
            nxt += period
            t0 = time.perf_counter()
            obs = Observation(dict.fromkeys(views, scene.frame(i)))
            rep = torch.from_numpy(world.encode(obs)).unsqueeze(0).to(action.dtype)
            action.decode(action.prepare(rep), joint, subtask)
            samples.append((time.perf_counter() - t0) * 1e3)
            time.sleep(max(0.0, nxt - time.perf_counter()))
    p50, p99 = np.percentile(samples, [50, 99])
    return {'p50': float(p50), 'p99': float(p99)}


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--seconds', type=float, default=30.0)
    ap.add_argument('--modes', default='multi,single')
    ap.add_argument('--config', default=None, help='parameter file (default: config/wam.yaml)')
    ap.add_argument('--no-one-view', action='store_true', help='skip the one-view run')
    args = ap.parse_args()
    args.config = args.config or default_config()
    modes = [m for m in args.modes.split(',') if m]
    results = {}
    for mode in modes:
        print(f'running the {mode}-process stack for {args.seconds:.0f} s ...', flush=True)
        results[mode] = run_mode(mode, args.seconds, args.config)
    one_view = None
    if not args.no_one_view:
        print(f'running the multi-process stack on one view for {args.seconds:.0f} s ...')
        with tempfile.TemporaryDirectory() as tmp:
            one_view = run_mode('multi', args.seconds, args.config, one_view_args(tmp), 'one_view')
    print('unified baseline (world expert inside every tick) ...', flush=True)
    unified = unified_baseline(args.config)
    head = dict(results[modes[0]])
    if one_view is not None:
        head['one_view'] = one_view
    head['mode'] = modes[0]
    head['unified_tick_ms'] = unified
    head['unified_over_split_p50'] = unified['p50'] / head['tick_ms']['p50']
    for mode in modes[1:]:
        head[f'{mode}_process'] = results[mode]
    path = update_report('hot_path', head)

    print()
    cols = modes
    rows = [
        ('tick ms p50', lambda r: r['tick_ms']['p50']),
        ('tick ms p99', lambda r: r['tick_ms']['p99']),
        ('tick ms max', lambda r: r['tick_ms']['max']),
        ('forward ms p50', lambda r: r['forward_ms']['p50']),
        ('forward ms p99', lambda r: r['forward_ms']['p99']),
        ('period ms p50', lambda r: r['period_ms']['p50']),
        ('period ms p99', lambda r: r['period_ms']['p99']),
        ('period ms max', lambda r: r['period_ms']['max']),
        ('bare rclpy timer p99', lambda r: r['bare_timer_period_ms']['p99']),
        ('open-loop ticks', lambda r: r['open_loop_ticks']),
        ('held ticks', lambda r: r['held_ticks']),
        ('conformance violations', lambda r: r['conformance_violations']),
        ('world calls / frame', lambda r: r['world_calls_per_frame']),
        ('cache hit rate', lambda r: r['cache_hit_rate']),
        ('degraded ticks', lambda r: r['degraded_ticks']),
        ('ticks', lambda r: r['ticks']),
        ('camera frames', lambda r: r['camera_frames']),
        ('encode ms p50', lambda r: r['encode_ms_p50']),
    ]
    if one_view is not None:
        results['one_view'] = one_view
        cols = [*modes, 'one_view']
    rows.append(('encode ms p99', lambda r: r['encode_ms']['p99']))
    print(f'{"":24}' + ''.join(f'{c:>18}' for c in cols))
    for name, get in rows:
        print(f'{name:24}' + ''.join(f'{get(results[c]):>18.3f}' for c in cols))
    print(
        f'{"unified tick ms p50/p99":24}{unified["p50"]:>9.2f} / {unified["p99"]:.2f}'
        f'   ({head["unified_over_split_p50"]:.1f}x the split tick at p50)'
    )
    print(f'\nwrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
