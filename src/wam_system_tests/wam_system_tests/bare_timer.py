"""A bare rclpy timer: the period jitter this machine allows a 50 Hz callback.

    python -m wam_system_tests.bare_timer [--seconds 20] [--period 0.02]

One node, one timer with an empty callback, on a single-threaded executor in its own
process at normal priority: what an rclpy timer gets under the same load. Benchmarks run
it beside the stack and report its period p99 next to the tick's. Prints one JSON line
(period_ms p50/p99/max, samples).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor


def measure(seconds: float, period_s: float) -> dict:
    rclpy.init()
    node = rclpy.create_node('bare_timer')
    fires: list[float] = []
    node.create_timer(period_s, lambda: fires.append(time.monotonic()))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    periods = np.diff(fires) * 1e3
    if len(periods) == 0:
        return {'p50': None, 'p99': None, 'max': None, 'samples': 0}
    p50, p99 = np.percentile(periods, [50, 99])
    return {
        'p50': float(p50),
        'p99': float(p99),
        'max': float(periods.max()),
        'samples': int(len(periods)),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--seconds', type=float, default=20.0)
    ap.add_argument('--period', type=float, default=0.02)
    args = ap.parse_args(argv)
    print(json.dumps(measure(args.seconds, args.period)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
