"""The same fleet in both action-expert layouts, one after the other on this host: a
process per robot, then the robots on instances (two robots each).

    python bench/instance_layouts.py [--robots 4] [--seconds 20] [--warmup 10]

Prints, per layout, the CPU cores by role over the measured window, the worst robot's
degraded-tick share, period, tick and obs->action p99, and the PSS of every process
together: what consolidating the action experts saves (or costs) on this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

from robot_agent.fleet import Fleet


def measure(robots: int, instances: int, seconds: float, warmup: float) -> dict:
    fleet = Fleet(robots, 'multi', robot='synthetic', instances=instances)
    try:
        fleet.wait_ready(200)
        fleet.spin_for(warmup)
        cpu0 = fleet.cpu_seconds_by_role()
        before = {r: fleet.monitors[r].action for r in fleet.names}
        t0 = time.monotonic()
        fleet.spin_for(seconds)
        dt = time.monotonic() - t0
        cpu1 = fleet.cpu_seconds_by_role()
        stats = {r: fleet.robot_stats(r) for r in fleet.names}
        degraded = []
        for r in fleet.names:
            a, b = before[r], fleet.monitors[r].action
            ticks = b.ticks - a.ticks
            degraded.append((b.degraded_ticks - a.degraded_ticks) / ticks if ticks else math.nan)
        return {
            'instances': instances or robots,
            'robots_per_process': math.ceil(robots / instances) if instances else 1,
            'cpu_cores': {k: round((cpu1[k] - cpu0[k]) / dt, 3) for k in cpu0},
            'degraded_share_worst': max(degraded),
            'period_ms_p99_worst': max(s['period_ms_p99'] for s in stats.values()),
            'tick_ms_p99_worst': max(s['tick_ms_p99'] for s in stats.values()),
            'obs_to_action_ms_p99_worst': max(s['obs_to_action_ms_p99'] for s in stats.values()),
            'pss_mb_total': fleet.memory_mb()['pss_mb_total'],
        }
    finally:
        fleet.shutdown()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--robots', type=int, default=4)
    ap.add_argument('--seconds', type=float, default=20.0)
    ap.add_argument('--warmup', type=float, default=10.0)
    args = ap.parse_args(argv)
    out = [
        measure(args.robots, k, args.seconds, args.warmup) for k in (0, math.ceil(args.robots / 2))
    ]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
