"""Capacity planner: how many robots this host carries with a model pair, and how many
world and action instances N robots need.

    python -m robot_agent.capacity [--one-view] [--seconds 60] [--warmup 15]
                                   [--utilization 0.85] [--thread-utilization 0.7]
                                   [--redundancy 0]
                                   [--robots 1,2,4,8] [--json FILE]

It measures the pair's unit costs here (``wam_core.serving.capacity``: world encode at
batch 1/2/4/8, action prepare and decode, the gate's check of a chunk), then the
processes of 1 and of 2 synthetic robots on one action-expert instance for
``--seconds`` each (the shm cache, as ``bench/fleet.py`` runs them) for what each robot
and the processes themselves cost besides the models' arithmetic, and prints the
predicted cores by role and instances for each N (2 robots per instance, as the
curve), and the host's capacity: the cost model's, checked against the two probes
(measured by the curve's code, ``robot_agent.fleet_measure``, and judged by the
curve's limits that a probe's length allows: at 15 + 60 s its degraded ticks, tick and
period p99, whose windows then hold no bring-up; not obs->action p99, whose window fills
at the camera's rate).
``--one-view``: a seeded one-view pair of the same architecture on the front camera.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict

from robot_agent.fleet_measure import CAMERA_HZ, judge, limits_for, measure
from wam_core.common.config import ActionExpertParams, HarnessParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, resolve_path
from wam_core.control.limits import ClampGate
from wam_core.models.registry import enable_torchscript, load_action_expert, load_world_expert
from wam_core.serving import capacity as cap


def one_view_pair(tmp: str) -> tuple[str, list[str]]:
    """A seeded one-view pair and the overlay that serves it on the front camera alone:
    (its path, the ROS arguments). A parameter-file overlay, as a ``-p node:name:=value``
    rule does not reach a node in a robot's namespace and a ``/**/node`` block does."""
    from wam_core.models.default_models import write_default_models

    info = write_default_models(tmp, views=('front',))
    path = os.path.join(tmp, 'one_view.yaml')
    with open(path, 'w', encoding='utf-8') as fh:
        fh.write(
            f"/**/world_expert:\n  ros__parameters:\n    model_dir: '{info['world_dir']}'\n"
            f"/**/action_expert:\n  ros__parameters:\n    model_dir: '{info['action_dir']}'\n"
            '/**/synthetic_robot:\n  ros__parameters:\n    cameras: [front]\n'
        )
    return path, ['--params-file', path]


def measure_pair(param_files: list[str], log=print) -> cap.ComputeCosts:
    from wam_sim.synthetic import SyntheticScene

    world_cfg = load_params(param_files, 'world_expert', WorldExpertParams)
    action_cfg = load_params(param_files, 'action_expert', ActionExpertParams)
    harness = load_params(param_files, 'harness', HarnessParams)
    world = load_world_expert(resolve_path(world_cfg.model_dir), world_cfg.precision)
    if world_cfg.traces_forward:  # as the node serves it
        why = enable_torchscript(world, tuple(cap.BATCHES))
        if why:
            log(f'world expert: eager forward, no TorchScript ({why})')
    action = load_action_expert(resolve_path(action_cfg.model_dir), action_cfg.precision)
    gate = ClampGate(harness.robot.joint_names, harness.joint_limits, harness.control.period_s)
    scene = SyntheticScene(128)
    frames = [scene.frame(i) for i in range(max(cap.BATCHES))]
    log(f'unit costs of {world.version} + {action.version}:')
    return cap.measure_compute(world, action, gate, frames, log=log)


def measure_robot_overheads(
    costs: cap.ComputeCosts, extra: list[str], seconds: float, warmup: float, log=print
) -> tuple[cap.RobotOverheads, dict[int, dict]]:
    """1, then 2 synthetic robots' processes on one instance for ``seconds`` each: cores
    by role, less the compute, split into per robot and fixed; and each probe's figures
    (``fleet_measure.measure``'s, and whether it was ``carried``)."""
    probes = {n: probe(n, extra, seconds, warmup, log) for n in (1, 2)}
    overheads = cap.overheads_from_two(
        probes[1]['cpu_cores'], probes[2]['cpu_cores'], costs, CAMERA_HZ
    )
    return overheads, probes


def probe(robots: int, extra: list[str], seconds: float, warmup: float, log=print) -> dict:
    """``robots`` synthetic robots' processes on one instance, measured as the curve
    measures a size and judged by the limits its window allows (``carried``;
    ``fleet_measure.limits_for``)."""
    log(
        f'{robots} robot(s) with their processes: {warmup:.0f} s warm-up, {seconds:.0f} s '
        'measured ...'
    )
    try:
        out = measure(robots, seconds, warmup, extra=extra, instances=1)
    except RuntimeError as e:  # the fleet did not come up within its bound: not carried
        log(f'  did not come up: {e}; not carried')
        return {'carried': False, 'bring_up_failed': str(e), 'cpu_cores': {}}
    # 'within_limits' and 'misses' stay the curve's verdict on every limit, for reading
    judged_on = limits_for(seconds, warmup)
    out['carried'], window_misses = judge(out, judged_on)
    out['judged_on'] = list(judged_on)
    unjudged = [m for m in out['misses'] if m not in window_misses]
    log(
        '  cores by role: '
        + ', '.join(f'{k} {v:.3f}' for k, v in out['cpu_cores'].items())
        + f'; degraded {out["degraded_share"] * 100:.1f} %, period p99 '
        f'{out["period_ms_p99"]:.2f} ms, obs->action p99 {out["obs_to_action_ms_p99"]:.1f} ms'
        + ('; carried' if out['carried'] else '; not carried: ' + ', '.join(window_misses))
        + (f' (not judged: {", ".join(unjudged)})' if unjudged else '')
    )
    return out


def run(
    one_view: bool = False,
    seconds: float = 60.0,
    warmup: float = 15.0,
    host_cores: float | None = None,
    utilization: float = cap.HOST_UTILIZATION,
    redundancy: float = 0.0,
    robots=(1, 2, 4, 8),
    log=print,
    thread_utilization: float = cap.THREAD_UTILIZATION,
) -> dict:
    """Measure and predict; the result as a dict (what ``--json`` writes)."""
    host_cores = float(host_cores or os.cpu_count() or 1)
    world_cfg = load_params(default_config(), 'world_expert', WorldExpertParams)
    with tempfile.TemporaryDirectory() as tmp:
        files, extra = [default_config()], []
        if one_view:
            path, extra = one_view_pair(tmp)
            files.append(path)
        costs = measure_pair(files, log)
        overheads, probes = measure_robot_overheads(costs, extra, seconds, warmup, log)
    kw = dict(
        camera_hz=CAMERA_HZ,
        utilization=utilization,
        thread_utilization=thread_utilization,
        redundancy=redundancy,
        max_batch=world_cfg.batch.max_size,
    )
    plans = {n: cap.plan(n, costs, overheads, host_cores, **kw) for n in robots}
    model_capacity = cap.host_capacity(costs, overheads, host_cores, **kw)
    carried = {n: bool(p['carried']) for n, p in probes.items()}
    capacity = cap.capacity_with_probes(model_capacity, carried)
    log(
        'beyond the models, per robot: '
        + ', '.join(f'{k} {v:.3f}' for k, v in overheads.cores.items())
        + '; fixed (action: per instance): '
        + ', '.join(f'{k} {v:.3f}' for k, v in overheads.fixed.items())
        + ' cores'
    )
    log(
        f'{"N":>3} {"batch":>5} {"encoder":>7} {"cores":>6}  world/action/harness/robots  inst w/a'
    )
    for n, p in plans.items():
        c = p.cores
        log(
            f'{n:>3} {p.world_batch:5.2f} {p.world_thread_load:7.2f} {p.total_cores:6.2f}  '
            f'{c["world"]:.2f}/{c["action"]:.2f}/{c["harness"]:.2f}/{c["robots"]:.2f}'
            f'{"":>9}{p.world_instances}/{p.action_instances}'
            + ('' if p.fits else f'  does not fit: {p.why_not}')
        )
    probed = ', '.join(f'{n}: {"carried" if ok else "not carried"}' for n, ok in carried.items())
    log(
        f'predicted capacity: {capacity} robot(s) on {host_cores:g} cores '
        f'({"one view" if one_view else "shipped two-view pair"}): the cost model at '
        f'{utilization:g} of the cores and {thread_utilization:g} of the encoder thread '
        f'{model_capacity}; the probes {probed}'
    )
    return {
        'predicted_robots': capacity,
        'model_robots': model_capacity,
        'probes_carried': {str(n): ok for n, ok in carried.items()},
        'host_cores': host_cores,
        'utilization': utilization,
        'thread_utilization': thread_utilization,
        'redundancy': redundancy,
        'views': costs.views,
        'unit_costs': asdict(costs),
        'per_robot_overhead_cores': overheads.cores,
        'fixed_overhead_cores': overheads.fixed,
        'measured_one_robot_cores': probes[1]['cpu_cores'],
        'measured_two_robot_cores': probes[2]['cpu_cores'],
        'probes': {str(n): p for n, p in probes.items()},
        'per_n': {str(n): asdict(p) for n, p in plans.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--one-view', action='store_true', help='a one-view pair (front camera)')
    ap.add_argument(
        '--seconds',
        type=float,
        default=60.0,
        help='each probe measured, s (judged on the percentiles its length fills)',
    )
    ap.add_argument('--warmup', type=float, default=15.0, help='s before each probe is measured')
    ap.add_argument('--host-cores', type=float, default=None, help='default: this machine')
    ap.add_argument(
        '--utilization',
        type=float,
        default=cap.HOST_UTILIZATION,
        help="share of the host's cores the plan may use",
    )
    ap.add_argument(
        '--thread-utilization',
        type=float,
        default=cap.THREAD_UTILIZATION,
        help="share of one core the world expert's encoder thread (and an instance's "
        'clock) may use',
    )
    ap.add_argument('--redundancy', type=float, default=0.0, help='spare instances, 0.5 = +50%%')
    ap.add_argument('--robots', default='1,2,4,8')
    ap.add_argument('--json', default='', help='write the result here')
    args = ap.parse_args(argv)
    if not 0 < args.utilization <= 1:
        ap.error('--utilization must be in (0, 1]')
    if not 0 < args.thread_utilization <= 1:
        ap.error('--thread-utilization must be in (0, 1]')
    if args.redundancy < 0:
        ap.error('--redundancy must be >= 0')
    try:
        robots = tuple(int(x) for x in args.robots.split(',') if x)
    except ValueError:
        ap.error(f'--robots must be a comma-separated list of counts, got {args.robots!r}')
    out = run(
        args.one_view,
        args.seconds,
        args.warmup,
        args.host_cores,
        args.utilization,
        args.redundancy,
        robots,
        log=lambda m: print(m, flush=True),
        thread_utilization=args.thread_utilization,
    )
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as fh:
            json.dump(out, fh, indent=2)
    return 0


if __name__ == '__main__':
    sys.exit(main())
