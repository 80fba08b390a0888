"""The capacity curve: how many robots one world expert on this machine carries.

    python bench/fleet.py [--robots 1,2,4,8] [--seconds 60] [--warmup 15]
                          [--robots-per-instance 2]

The sizes are ``--robots`` plus, when the capacity planner runs first (the default), its
predicted capacity and the size after it, so that a prediction is checked where it was
made. For each N: N synthetic robots (30 Hz cameras, 128 px, 100 Hz joint states) under
/robot<k>/, one world expert for all of them, the robots' action experts in
ceil(N / robots-per-instance) action-expert instances (one process, one clock and one
model each, each the standby of the next one's robots; 0: a process per robot), and a
gate and a task manager per robot, each in its own process (the shm cache). After a
warm-up the counts are taken over the next ``--seconds`` (deltas); the latency
percentiles are the nodes'
windows of their last 3000 samples: 60 s of ticks and periods at 50 Hz, ~100 s of
representation ages and obs->action at ~30 Hz (those include part of the warm-up and
bring-up).
per N the worst robot's tick p99 and period p99, representation age p99, obs->action
p99, world calls per distinct frame (the one furthest from 1.00), mean frames per world
forward pass, degraded-tick share, and the memory of every process together (RSS summed
and PSS, which counts shared libraries once). ``capacity_robots`` is the largest N whose
worst robot keeps tick p99 <= 12 ms, period p99 <= 21 ms, degraded ticks < 1 % and
obs->action p99 <= 60 ms. Each N also reports where the representation's time to live
goes: the world expert's encode p50/p99 and the camera stamp -> descriptor sent p50/p99
(with a 30 Hz camera the newest representation is a camera period older when the next
one lands, so a TTL of 50 ms leaves ~17 ms for that) and the CPU cores used by role.

The curve is measured with the shipped world expert (front and wrist views), then again
(``--one-view-robots``, section ``fleet.one_view``) with a seeded one-view pair of the
same architecture on the front camera: a world expert half as costly. Then the cross-host
robot count again with the Mooncake Store between a world host (127.0.0.2) and a robot
host (127.0.0.3): section ``cross_host``. Writes sections ``fleet`` and ``cross_host``
of bench/report.json.
"""

from __future__ import annotations

import argparse
import sys
import tempfile

from robot_agent.capacity import one_view_pair
from robot_agent.fleet_measure import CAMERA_HZ, LIMITS, instances_for, measure
from wam_core.serving.capacity import largest_carried
from wam_system_tests.report import update_report


def curve(counts: list[int], args, tag: str, extra: list[str] | None = None):
    """Each N of ``counts`` measured: (per N, capacity_robots, the first failing N or None)."""
    per_n = {}
    for n in counts:
        print(
            f'[{tag}] {n} robot(s) on '
            f'{instances_for(n, args.robots_per_instance) or n} action-expert process(es): '
            f'bring-up, {args.warmup:.0f} s warm-up, {args.seconds:.0f} s measured',
            flush=True,
        )
        k = instances_for(n, args.robots_per_instance)
        try:
            per_n[str(n)] = r = measure(n, args.seconds, args.warmup, extra=extra, instances=k)
        except RuntimeError as e:
            # the fleet did not come up within the bring-up bound (wait_ready): this N fails
            # with the reason, and a larger one is not tried
            per_n[str(n)] = {
                'within_limits': False,
                'bring_up_failed': str(e),
                'misses': [f'bring-up: {e}'],
            }
            print(f'[{tag}] N={n}: bring-up failed: {e}', flush=True)
            break
        print(
            f'[{tag}] N={n}: tick p99 {r["tick_ms_p99"]:.2f} ms, period p99 '
            f'{r["period_ms_p99"]:.2f} ms, repr age p99 {r["repr_age_ms_p99"]:.1f} ms, '
            f'obs->action p99 {r["obs_to_action_ms_p99"]:.1f} ms, calls/frame '
            f'{r["world_calls_per_frame"]:.2f}, batch {r["batch_mean"]:.2f}, degraded '
            f'{r["degraded_share"] * 100:.1f}%, memory RSS {r["rss_mb_total"]:.0f} MB / PSS '
            f'{r["pss_mb_total"]:.0f} MB; CPU cores '
            + ', '.join(f'{k} {v:.2f}' for k, v in r['cpu_cores'].items())
            + f'; world encode p50/p99 {r["world_encode_ms_p50"]:.1f}/'
            f'{r["world_encode_ms_p99"]:.1f} ms, camera stamp -> descriptor p50/p99 '
            f'{r["capture_to_published_ms_p50"]:.1f}/{r["capture_to_published_ms_p99"]:.1f} ms'
            + (f'; misses: {", ".join(r["misses"])}' if r['misses'] else ''),
            flush=True,
        )
    carried = {n: per_n[str(n)]['within_limits'] for n in counts if str(n) in per_n}
    failing = [n for n in sorted(carried) if not carried[n]]
    return per_n, largest_carried(carried), failing[0] if failing else None


def capacity_plan(one_view: bool) -> dict:
    """The capacity planner's prediction for this machine (``robot_agent.capacity``)."""
    from robot_agent.capacity import run

    tag = 'planner one view' if one_view else 'planner'
    return run(one_view, log=lambda m: print(f'[{tag}] {m}', flush=True))


def with_prediction(counts: list[int], planned: dict | None) -> list[int]:
    """The curve's sizes plus the planner's prediction and the size after it: a
    prediction is checked where it was made, not between two points of a coarse grid
    (1, 2, 4, 8 said 'carries 2 but not 4' and left 3 unmeasured)."""
    if not planned:
        return counts
    p = planned['predicted_robots']
    return sorted(set(counts) | {n for n in (p, p + 1) if n >= 1})


def planner_section(planned: dict, measured: int) -> dict:
    """The prediction beside the measured capacity: within 25 % of it (0 only for 0)."""
    predicted = planned['predicted_robots']
    return {
        'predicted_robots': predicted,
        'model_robots': planned.get('model_robots', predicted),
        'measured_robots': measured,
        'within_25pct': abs(predicted - measured) <= 0.25 * measured,
        'plan': planned,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--robots', default='1,2,4,8')
    ap.add_argument('--seconds', type=float, default=60.0)
    ap.add_argument('--warmup', type=float, default=15.0)
    ap.add_argument('--cross-host-robots', type=int, default=4)
    ap.add_argument(
        '--one-view-robots',
        default='1,2,4',
        help="the curve again with a one-view world expert ('': skip)",
    )
    ap.add_argument('--no-planner', action='store_true', help='skip the capacity planner')
    ap.add_argument(
        '--robots-per-instance',
        type=int,
        default=2,
        help='robots per action-expert instance (0: an action-expert process per robot)',
    )
    args = ap.parse_args(argv)
    planned = None if args.no_planner else capacity_plan(False)
    counts = with_prediction([int(x) for x in args.robots.split(',')], planned)
    per_n, capacity, first = curve(counts, args, 'fleet')
    base = per_n[str(counts[0])]
    per_robot_mb = {
        str(n): (per_n[str(n)]['pss_mb_total'] - base['pss_mb_total']) / (n - counts[0])
        for n in counts
        if n != counts[0] and 'pss_mb_total' in per_n.get(str(n), {})
    }
    fleet_section = {
        'robots': counts,
        'per_n': per_n,
        'capacity_robots': capacity,
        'limits': LIMITS,
        'first_failing_n': first,
        'first_failing_misses': per_n[str(first)]['misses'] if first else [],
        'pss_mb_per_added_robot': per_robot_mb,
        'seconds': args.seconds,
        'camera_hz': CAMERA_HZ,
        'image_px': 128,
        'views': ['front', 'wrist'],  # the shipped world expert's
        'ttl_ms': per_n[str(counts[0])]['ttl_ms'],  # repr_cache.ttl_ms as the robots used it
        'robots_per_action_instance': args.robots_per_instance,
    }
    if planned is not None:
        fleet_section['planner'] = planner_section(planned, capacity)
    update_report('fleet', fleet_section)  # now: the one-view curve adds to it
    if args.one_view_robots:
        # the same curve with a world expert half as costly: one view (a seeded pair of the
        # same architecture on the front camera), to show what the world expert's cost
        # does to the capacity
        ov_planned = None if args.no_planner else capacity_plan(True)
        with tempfile.TemporaryDirectory() as tmp:
            ov_counts = with_prediction(
                [int(x) for x in args.one_view_robots.split(',')], ov_planned
            )
            ov_per_n, ov_capacity, ov_first = curve(
                ov_counts, args, 'fleet one view', one_view_pair(tmp)[1]
            )
        fleet_section['one_view'] = {
            'robots': ov_counts,
            'per_n': ov_per_n,
            'capacity_robots': ov_capacity,
            'first_failing_n': ov_first,
            'first_failing_misses': ov_per_n[str(ov_first)]['misses'] if ov_first else [],
        }
        if ov_planned is not None:
            fleet_section['planner']['one_view'] = planner_section(ov_planned, ov_capacity)
    update_report('fleet', fleet_section)
    print(f'[fleet] capacity_robots = {capacity}; PSS per added robot {per_robot_mb}', flush=True)
    for key, sec in (
        ('', fleet_section.get('planner')),
        (' one view', (fleet_section.get('planner') or {}).get('one_view')),
    ):
        if sec:
            print(
                f'[fleet{key}] planner predicted {sec["predicted_robots"]} (its cost model '
                f'alone {sec["model_robots"]}), measured {sec["measured_robots"]}',
                flush=True,
            )
    if 'one_view' in fleet_section:
        print(
            f'[fleet one view] capacity_robots = {fleet_section["one_view"]["capacity_robots"]}',
            flush=True,
        )

    n = args.cross_host_robots
    print(f'[cross_host] {n} robots with the Mooncake Store (127.0.0.2 -> 127.0.0.3)', flush=True)
    k = instances_for(n, args.robots_per_instance)  # the curve's layout
    remote = measure(n, args.seconds, args.warmup, cache='mooncake', instances=k)
    same = per_n.get(str(n), {})
    if 'cache_read_ms_p50' not in same:  # not in the curve, or it did not come up there
        same = measure(n, args.seconds, args.warmup, instances=k)
    cross = {
        'robots': n,
        'fetch_ms': {
            # shm: the tick's own read of the slot; mooncake: descriptor -> local ring
            'shm': {'p50': same['cache_read_ms_p50'], 'p99': same['cache_read_ms_p99']},
            'mooncake': {'p50': remote['fetch_ms_p50'], 'p99': remote['fetch_ms_p99']},
        },
        'obs_to_action_ms_p99': {
            'same_host': same['obs_to_action_ms_p99'],
            'cross_host': remote['obs_to_action_ms_p99'],
        },
        'mooncake_run': remote,
    }
    update_report('cross_host', cross)
    print(
        f'[cross_host] fetch p50/p99: shm {same["cache_read_ms_p50"]:.3f}/'
        f'{same["cache_read_ms_p99"]:.3f} ms, mooncake {remote["fetch_ms_p50"]:.2f}/'
        f'{remote["fetch_ms_p99"]:.2f} ms; obs->action p99 same host '
        f'{same["obs_to_action_ms_p99"]:.1f} ms, cross host '
        f'{remote["obs_to_action_ms_p99"]:.1f} ms',
        flush=True,
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
