"""The same fleet in both action-expert layouts, one after the other on this host: a
process per robot, then the robots on instances (two robots each).

    python bench/instance_layouts.py [--robots 4] [--seconds 60] [--warmup 15]

Prints, per layout, the CPU cores by role over the measured window, the worst robot's
degraded-tick share, period, tick and obs->action p99, and the PSS of every process
together: what consolidating the action experts saves (or costs) on this machine. Each
layout is measured as the capacity curve measures a size (``robot_agent.fleet_measure``).
"""

from __future__ import annotations

import argparse
import json
import sys

from robot_agent.fleet_measure import instances_for, measure

SHOWN = (
    'degraded_share',
    'period_ms_p99',
    'tick_ms_p99',
    'obs_to_action_ms_p99',
    'pss_mb_total',
)


def layout(robots: int, per_instance: int, seconds: float, warmup: float) -> dict:
    """One layout's figures (``per_instance`` 0: a process per robot)."""
    figures = measure(robots, seconds, warmup, instances=instances_for(robots, per_instance))
    return {
        'action_processes': figures['instances']['action'],
        'robots_per_process': figures['instances']['robots_per_action_instance'],
        **{k: figures[k] for k in SHOWN},
        'cpu_cores': {role: round(c, 3) for role, c in figures['cpu_cores'].items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--robots', type=int, default=4)
    ap.add_argument('--seconds', type=float, default=60.0)  # the curve's
    ap.add_argument('--warmup', type=float, default=15.0)
    args = ap.parse_args(argv)
    out = [layout(args.robots, k, args.seconds, args.warmup) for k in (0, 2)]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
