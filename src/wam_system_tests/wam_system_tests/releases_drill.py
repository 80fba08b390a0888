"""The releases drill (`make releases`): switches, rollbacks and canaries on a running
2-robot fleet, repeated; section ``releases`` of bench/report.json.

    python -m wam_system_tests.releases_drill [--repeat 10] [--window 12] [--json OUT]

A registry in a temporary directory holds four releases of the tabletop arm:

- ``shipped``: the shipped pair (models/), live at the start;
- ``reseed``: the shipped pair with every weight perturbed (N(0, 1e-3 x the tensor's
  std), seeded) under new versions: a good release whose world version differs, so its
  representations never share a key space with the shipped ones. It is not a retrained
  model (training takes ~20 min here);
- ``limit``: the shipped world expert with an action expert whose output layer is biased
  to drive ``arm_joint_2`` to the end of its step bound on every row (toward its upper
  limit): it passes the conformance kit (finite, deterministic, in budget);
- ``tampered``: a perturbed pair registered, then its world directory rewritten with
  another model version (a re-export under the same path): the world version on disk no
  longer matches what the registry recorded.

The fleet (2 synthetic robots, one world expert, shm rings, a process per node) starts
on ``shipped``. Each repeat:

(a) switch both robots to ``reseed`` under load (load + warm-up beside the served model,
    arm, commit): switch time = commit -> each robot's first new-version chunk;
(c) roll back to ``shipped`` within the confirmation window (no load): rollback time =
    request -> first chunk of the previous release; confirm;
(b) canary ``limit`` on robot1 for up to ``--window`` s: its objectives are watched and a
    breach rolls it back by itself (time: the canary's first new chunk -> the first
    shipped chunk again); robot2's full-chunk rate over the canary is held against the
    same span before it; then canary ``tampered`` on robot1: refused at load (the digest
    check), nothing switches (time: request -> the abort).

Over the whole drill every robot's forwarded trajectories are recorded
(``fault_recorder.Recorder``: unsafe and stale points, safety stops) and each action expert
counts mixed-version ticks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from wam_core.cache.freshness import expected_ttl_ms, stale_bound_s
from wam_core.common.config import ActionExpertParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, resolve_path, workspace_root
from wam_core.common.robot import TABLETOP_ARM
from wam_core.models.manifest import read_manifest, write_manifest
from wam_core.releases.objectives import Objectives
from wam_core.releases.registry import CANARY, LIVE, ROLLED_BACK, Registry

from .fault_recorder import Recorder, configured_limits
from .report import update_report

UNAFFECTED_RATE = 0.95
RATE_SPAN_S = 5.0


def _perturb(src: str, dst: str, seed: int, scale: float, version: str, extra=None) -> None:
    """Copy a model directory with every float weight perturbed; a new manifest."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    path = os.path.join(dst, 'model.safetensors')
    weights = load_file(path)
    g = torch.Generator().manual_seed(seed)
    for k, t in weights.items():
        if t.is_floating_point() and t.numel() > 1 and scale > 0:
            noise = torch.randn(t.shape, generator=g, dtype=torch.float32) * float(t.float().std())
            weights[k] = (t.float() + scale * noise).to(t.dtype)
    save_file(weights, path, metadata={'format': 'pt'})
    m = read_manifest(src)
    write_manifest(dst, m.name, version, {**m.extra, **(extra or {}), 'derived_from': m.version})


def _limit_seeker(src: str, dst: str, joint: int, joints: int) -> None:
    """The shipped action expert with its last layer's bias driving one joint up."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    path = os.path.join(dst, 'model.safetensors')
    weights = load_file(path)
    last = sorted(k for k in weights if k.startswith('mlp.') and k.endswith('.bias'))[-1]
    bias = weights[last].clone()
    bias[joint::joints] += 10.0  # tanh -> 1: every row at the end of its step bound
    weights[last] = bias.to(weights[last].dtype)
    save_file(weights, path, metadata={'format': 'pt'})
    m = read_manifest(src)
    write_manifest(dst, m.name, f'{m.version}-limit', {**m.extra, 'derived_from': m.version})
    del torch


def write_reseeded_pair(root: str, seed: int) -> tuple[str, str]:
    """The shipped pair with its weights perturbed (seeds ``seed`` and ``seed + 1``) under
    a new world version, in ``root``/world and ``root``/action: a good release whose
    representations never share a key space with the shipped ones."""
    world, action = resolve_path('models/world_expert'), resolve_path('models/action_expert')
    version = f'{read_manifest(world).version}-reseed{seed}'
    _perturb(world, f'{root}/world', seed, 1e-3, version)
    _perturb(action, f'{root}/action', seed + 1, 1e-3, version, {'world_version': version})
    return f'{root}/world', f'{root}/action'


def make_releases(root: str, reg: Registry, log) -> dict[str, str]:
    world, action = resolve_path('models/world_expert'), resolve_path('models/action_expert')
    wv = read_manifest(world).version
    limit = os.path.join(root, 'limit', 'action')
    _limit_seeker(action, limit, 1, len(TABLETOP_ARM.joint_names))
    pairs = {
        'shipped': (world, action),
        'reseed': write_reseeded_pair(os.path.join(root, 'reseed'), 1),
        'limit': (world, limit),
        'tampered': write_reseeded_pair(os.path.join(root, 'tampered'), 3),
    }
    for name, (w, a) in pairs.items():
        t0 = time.monotonic()
        reg.register(name, w, a, TABLETOP_ARM, f'releases drill: {name}', actor='drill')
        log(f'registered {name} ({time.monotonic() - t0:.1f} s with the conformance kit)')
    reg.transition('shipped', LIVE, 'the drill starts from the shipped pair', actor='drill')
    # re-exported under the same path after registration: another version on disk
    m = read_manifest(pairs['tampered'][0])
    write_manifest(pairs['tampered'][0], m.name, f'{wv}-reseed3-reexport', m.extra)
    return {k: v[0] for k, v in pairs.items()}


def _pcts(xs: list[float]) -> dict:
    if not xs:
        return {'p50': None, 'p99': None}
    p50, p99 = np.percentile(xs, [50, 99])
    return {'p50': round(float(p50), 2), 'p99': round(float(p99), 2)}


def _drill_overlay(tmp: str, ttl_ms: float | None) -> str:
    """The drill's parameters: robots that go where they are sent (a limit-seeking policy
    takes its joint to the stop), and the representation TTL (None: config/wam.yaml's)."""
    text = '/**/synthetic_robot:\n  ros__parameters:\n    follow_commands: true\n'
    for node in ('world_expert', 'action_expert') if ttl_ms is not None else ():
        text += (
            f'/**/{node}:\n  ros__parameters:\n    repr_cache:\n      ttl_ms: {float(ttl_ms)}\n'
        )
    path = os.path.join(tmp, 'drill.yaml')
    with open(path, 'w', encoding='utf-8') as fh:
        fh.write(text)
    return path


def run(repeat: int, window_s: float, log=print, ttl_ms: float | None = None) -> dict:
    import rclpy  # noqa: F401  (the fleet initialises it)

    from robot_agent.fleet import Fleet
    from robot_agent.release_manager import ReleaseManager
    from robot_agent.releases import release_overlay

    tmp = tempfile.mkdtemp(prefix='wam_releases_')
    db = os.path.join(tmp, 'releases.db')
    reg = Registry(db)
    make_releases(tmp, reg, log)
    overlays = [release_overlay('shipped', db, tmp), _drill_overlay(tmp, ttl_ms)]
    config = default_config()
    action_cfg = load_params([config, *overlays], 'action_expert', ActionExpertParams)
    world_cfg = load_params([config, *overlays], 'world_expert', WorldExpertParams)
    period = action_cfg.control.period_s
    ttl_s = expected_ttl_ms(world_cfg, action_cfg) / 1e3
    fleet = Fleet(2, 'multi', config, robot='synthetic', overlays=overlays)
    mgr = None
    steps: list[dict] = []
    try:
        fleet.wait_ready(180)
        fleet.spin_for(5.0, until=lambda: all(not m.safety_stop for m in fleet.monitors.values()))
        versions = {reg.get(n).world_version for n in ('shipped', 'reseed', 'limit', 'tampered')}
        recs = {
            r: Recorder(
                fleet,
                versions,
                stale_bound_s(ttl_s * 1e3, period),
                configured_limits(config),
                period,
                node=fleet.monitors[r],
                namespace=f'/{r}',
            )
            for r in fleet.names
        }
        mgr = ReleaseManager(fleet.names, log=log)
        # the manager and the recorders run on their own threads; the fleet's robots and
        # monitors on this one, between the steps and while waiting
        fleet.spin_for(3.0)
        start = {r: mgr.snapshot(r) for r in fleet.names}
        t_start = time.monotonic()
        rel = {n: reg.get(n) for n in ('shipped', 'reseed', 'limit', 'tampered')}
        for i in range(repeat):
            log(f'--- repeat {i + 1}/{repeat}')
            # (a) the good release: a canary on robot1, then robot2, under load
            reg.transition(
                'reseed', CANARY, f'drill repeat {i + 1}', robots=['robot1'], actor='drill'
            )
            out = _in_background(
                fleet,
                lambda: mgr.canary(
                    rel['reseed'], rel['shipped'], ['robot1'], window_s, Objectives(),
                    promote=True, confirm=False,
                ),
            )  # fmt: skip
            if not out.promoted:  # a good release must hold its objectives
                reg.transition('reseed', ROLLED_BACK, '; '.join(out.reasons), actor='drill')
                steps.append({'step': 'canary_reseed', 'repeat': i, 'at_s': _at(t_start),
                              'rolled_back': True, 'reasons': out.reasons})  # fmt: skip
                log(f'canary reseed rolled back (a false alarm): {out.reasons}')
                continue
            reg.transition('reseed', LIVE, f'drill repeat {i + 1}: canary held', actor='drill')
            for part, res in (('canary', out.switch), ('promotion', out.promotion)):
                steps.append({'step': 'switch', 'part': part, 'repeat': i, 'at_s': _at(t_start),
                              **_fig(res)})  # fmt: skip
                log(f'switch to reseed ({part}): {_fig(res)}')
            fleet.spin_for(1.0)
            # (c) manual rollback within the confirmation window: no load
            res = _in_background(fleet, lambda: mgr.switch(rel['shipped']))
            _in_background(fleet, lambda: mgr.confirm('shipped'))
            reg.transition(
                'reseed', ROLLED_BACK, f'drill repeat {i + 1}: manual rollback', actor='drill'
            )
            reg.transition('shipped', LIVE, 'rollback of reseed', actor='drill')
            steps.append({'step': 'rollback', 'repeat': i, 'at_s': _at(t_start), **_fig(res)})
            log(f'rollback to shipped: {_fig(res)}')
            fleet.spin_for(2.0)
            # (b) a bad canary on robot1: it must roll back by itself
            for bad in ('limit', 'tampered'):
                reg.transition(
                    bad, CANARY, f'drill repeat {i + 1}', robots=['robot1'], actor='drill'
                )
                t0 = time.monotonic()
                out = _in_background(
                    fleet,
                    lambda bad=bad: mgr.canary(
                        rel[bad], rel['shipped'], ['robot1'], window_s, Objectives(), promote=False
                    ),
                )
                # robot2 over the canary (at least RATE_SPAN_S from its request) against the
                # same span just before it
                span = max(time.monotonic() - t0, RATE_SPAN_S)
                fleet.spin_for(max(0.0, t0 + span - time.monotonic()) + 0.2)
                before = _full_rate(recs['robot2'], t0 - span, t0)
                during = _full_rate(recs['robot2'], t0, t0 + span)
                if out.promoted:
                    reg.transition(bad, LIVE, 'held its objectives (unexpected)', actor='drill')
                else:
                    reg.transition(
                        bad, ROLLED_BACK, '; '.join(out.reasons), robots=['robot1'], actor='drill'
                    )
                step = {
                    'step': f'canary_{bad}',
                    'repeat': i,
                    'at_s': round(t0 - t_start, 2),
                    'rolled_back': not out.promoted,
                    'reasons': out.reasons,
                    'auto_rollback_s': round(out.auto_rollback_s, 3),
                    'other_rate_ratio': round(during / before, 3) if before else None,
                    'other_rate_hz': [round(before, 1), round(during, 1)],
                }
                if out.switch is not None:
                    step['switch'] = _fig(out.switch)
                if out.rollback is not None:
                    step['rollback'] = _fig(out.rollback)
                steps.append(step)
                log(f'canary {bad}: {json.dumps(step)}')
                fleet.spin_for(2.0)
        fleet.spin_for(2.0)
        end = {r: mgr.snapshot(r) for r in fleet.names}
        unsafe = sum(rec.unsafe for rec in recs.values())
        t_all = min(rec.forwarded[0][0] for rec in recs.values() if rec.forwarded)
        stale_at = sorted(
            round(t - t_start, 2)
            for rec in recs.values()
            for t, n, stamp in rec.forwarded
            if t >= t_all and n > 1 and rec.stale(stamp, t)
        )
        # the drill's steps (the fleet settling before them is not a switch's)
        stale = sum(1 for t in stale_at if t >= 0.0)
        # the gates' own counts, and what the robots' stop topics carried (the larger)
        stops = sum(
            max(
                end[r].safety_stops - start[r].safety_stops,
                sum(1 for t, s in recs[r].stops if s and t >= t_all),
            )
            for r in fleet.names
        )
        mixed = sum(end[r].mixed_version_ticks for r in fleet.names)
        audit = len(reg.history())
    finally:
        if mgr is not None:
            mgr.close()
        fleet.shutdown()
        reg.close()
    out = _summary(steps, repeat, unsafe, stale, stops, mixed, audit, tmp)
    out['stale_at_s'] = stale_at  # since the first step, to place them on the steps' timeline
    # while the fleet settled, before the first step (not counted against the switches)
    out['summary']['stale_forwarded_before_steps'] = sum(1 for t in stale_at if t < 0.0)
    out['summary']['ttl_ms'] = ttl_s * 1e3
    if ttl_ms is not None:
        out['summary']['command'] += f' --ttl-ms {ttl_ms:g}'
    return out


def _summary(steps, repeat, unsafe, stale, stops, mixed, audit, tmp) -> dict:
    switch = [v for s in steps if s['step'] == 'switch' for v in s['switch_ms'].values()]
    rollback = [v for s in steps if s['step'] == 'rollback' for v in s['request_ms'].values()]
    bad = [s for s in steps if s['step'] in ('canary_limit', 'canary_tampered')]
    auto = [s['auto_rollback_s'] for s in bad]
    false_alarms = [s for s in steps if s['step'] == 'canary_reseed']
    degraded = [
        v
        for s in steps
        for part in (s, s.get('switch', {}), s.get('rollback', {}))
        for v in part.get('degraded_ticks', {}).values()
    ]
    baseline = [
        v
        for s in steps
        for part in (s, s.get('switch', {}), s.get('rollback', {}))
        for v in part.get('baseline_degraded', {}).values()
    ]
    ratios = [s['other_rate_ratio'] for s in steps if s.get('other_rate_ratio') is not None]
    out = {
        'repeats': repeat,
        'switch_ms': _pcts(switch),
        'rollback_ms': _pcts(rollback),
        'auto_rollback_s': _pcts(auto),
        'degraded_ticks_per_switch': {
            'p50': _pcts(degraded)['p50'],
            'p99': _pcts(degraded)['p99'],
            'max': max(degraded, default=None),
            'mean': round(float(np.mean(degraded)), 2) if degraded else None,
            'switches': len(degraded),
        },
        # the same robots over equally long windows right before each arm: the host's rate
        'baseline_degraded_ticks_per_window': {
            'p50': _pcts(baseline)['p50'],
            'p99': _pcts(baseline)['p99'],
            'max': max(baseline, default=None),
            'mean': round(float(np.mean(baseline)), 2) if baseline else None,
        },
        'mixed_version_ticks': int(mixed),
        'stale_forwarded': int(stale),
        'unsafe_forwarded': int(unsafe),
        'safety_stops': int(stops),
        'bad_canaries_rolled_back': sum(1 for s in bad if s['rolled_back']),
        'bad_canaries': len(bad),
        'good_canaries_rolled_back': len(false_alarms),
        'other_robot_rate_ratio_min': min(ratios, default=None),
        'load_s': _pcts([s['load_s'] for s in steps if s['step'] == 'switch']),
        'load_peak_rss_mb': max(
            (v for s in steps if s['step'] == 'switch' for v in s['peak_rss_mb'].values()),
            default=None,
        ),
        'audit_rows': audit,
        'registry': os.path.join(tmp, 'releases.db'),
        'command': f'python -m wam_system_tests.releases_drill --repeat {repeat}',
        'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()),
    }
    out['targets'] = {
        'zero_mixed_stale_unsafe_stops': not (mixed or stale or unsafe or stops),
        'degraded_ticks_per_switch_p99_le_2': (out['degraded_ticks_per_switch']['p99'] or 0) <= 2,
        'rollback_p99_le_1s': (out['rollback_ms']['p99'] or 1e9) <= 1000,
        'auto_rollback_p99_le_10s': (out['auto_rollback_s']['p99'] or 1e9) <= 10
        and out['bad_canaries_rolled_back'] == len(bad),
        'good_canary_promoted_every_time': not false_alarms,
        'other_robot_rate_within_5pct': (out['other_robot_rate_ratio_min'] or 0)
        >= UNAFFECTED_RATE,
    }
    return {'summary': out, 'steps': steps}


def _fig(res) -> dict:
    return {
        'load_s': round(res.load_s, 3),
        'switch_ms': {r: round(v, 1) for r, v in res.switch_ms.items()},
        'request_ms': {r: round(v, 1) for r, v in res.request_ms.items()},
        'degraded_ticks': dict(res.degraded_ticks),
        'degraded_reasons': dict(res.degraded_reasons),
        'baseline_degraded': dict(res.baseline_degraded),
        'peak_rss_mb': {k: round(v, 1) for k, v in res.peak_rss_mb.items()},
    }


def _at(t_start: float) -> float:
    return round(time.monotonic() - t_start, 2)


def _full_rate(rec: Recorder, t0: float, t1: float) -> float:
    return sum(1 for t, k, _ in rec.forwarded if t0 <= t <= t1 and k > 1) / max(t1 - t0, 1e-9)


def _in_background(fleet, fn):
    """Run a manager call on a thread while this one spins the fleet's robots."""
    import threading

    box: dict = {}

    def work():
        try:
            box['out'] = fn()
        except BaseException as exc:  # handed back to the caller
            box['err'] = exc

    th = threading.Thread(target=work, name='release_step', daemon=True)
    th.start()
    while th.is_alive():
        fleet.spin_for(0.05)
    if 'err' in box:
        raise box['err']
    return box['out']


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--repeat', type=int, default=10)
    ap.add_argument('--window', type=float, default=12.0, help='canary watch window, s')
    ap.add_argument(
        '--ttl-ms',
        type=float,
        default=0.0,
        help="the representation TTL, ms (default: config/wam.yaml's, auto: a camera period "
        "plus the world expert's timeout_ms)",
    )
    ap.add_argument('--json', default='')
    args = ap.parse_args(argv)
    ttl = args.ttl_ms or None
    out = run(args.repeat, args.window, log=lambda m: print(m, flush=True), ttl_ms=ttl)
    s = out['summary']
    # the drill's own TTL is the section the targets are judged on; another is kept beside
    update_report('releases' if ttl is None else f'releases_ttl_{s["ttl_ms"]:g}ms', s)
    path = os.path.join(workspace_root(), 'bench', 'releases_steps.json')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w', encoding='utf-8') as fh:
        json.dump(out, fh, indent=1)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as fh:
            json.dump(out, fh, indent=1)
    print(json.dumps(s, indent=1))
    missed = [k for k, ok in s['targets'].items() if not ok]
    print(
        'releases drill: ' + ('all targets met' if not missed else 'MISSED ' + ', '.join(missed))
    )
    return 0 if not missed else 1


if __name__ == '__main__':
    sys.exit(main())
