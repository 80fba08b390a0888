#!/usr/bin/env python3
"""Harness benchmark -> the "harness" section of bench/report.json.

plan_rules_ms: the rule planner over a mix of English and Chinese instructions.
embed_ms: cold = first embedding of a new sentence (a MiniLM forward), warm = LRU hit.
clamp_ms_per_chunk: the clamping gate on raw 16x7 chunks: noise (clamped at every point,
  p50/p99), and a chunk within the limits (feasible_*), also through the point-by-point
  pass alone in the same run (feasible_point_by_point_p50: the baseline).
safety_stop_latency_ms: through real rclpy, from an ERROR diagnostic published by a
  probe to the hold trajectory arriving back at the probe (20 trials, reset between).
"""

from __future__ import annotations

import os
import random
import sys
import time

import numpy as np

from wam_core.common.robot import TABLETOP_ARM
from wam_system_tests.report import update_report

INSTRUCTIONS = [
    'put the red apple in the fridge',
    'Grasp the red apple and put it in the fridge',
    'pick up the green cube',
    'open the fridge, put the red apple in the fridge and close the fridge',
    'go to the table',
    '把桌上的红色苹果放进冰箱',
    '打开冰箱',
    '拿起红色苹果，然后把它放进冰箱',
]


def pct(samples, *qs):
    return [float(x) for x in np.percentile(samples, qs)]


def bench_rules(n=2000):
    from wam_core.planning.rules import RulePlanner

    p = RulePlanner()
    ts = []
    for i in range(n):
        t0 = time.perf_counter()
        p.plan(INSTRUCTIONS[i % len(INSTRUCTIONS)])
        ts.append((time.perf_counter() - t0) * 1e3)
    p50, p99 = pct(ts, 50, 99)
    return {'p50': p50, 'p99': p99}


def bench_embed():
    from wam_core.planning.embedding import SubtaskEmbedder

    e = SubtaskEmbedder()
    cold = []
    for i in range(20):
        t0 = time.perf_counter()
        e.embed(f'grasp the red apple number {i}')
        cold.append((time.perf_counter() - t0) * 1e3)
    warm = []
    for i in range(2000):
        t0 = time.perf_counter()
        e.embed(f'grasp the red apple number {i % 20}')
        warm.append((time.perf_counter() - t0) * 1e3)
    return {
        'cold': float(np.median(cold)),
        'warm_p50': pct(warm, 50)[0],
        'cold_p99': pct(cold, 99)[0],
    }


def bench_clamp(n=2000):
    from wam_core.control.limits import ClampGate

    g = ClampGate(TABLETOP_ARM.joint_names, TABLETOP_ARM.limits, 0.02)
    N = list(TABLETOP_ARM.joint_names)
    rng = np.random.default_rng(0)
    cur = np.zeros(7)
    cur[6] = 0.02
    t = np.arange(16) * 0.02
    ts = []
    for _ in range(n):  # the worst case: noise, clamped at every point
        pos = cur + rng.normal(0, 0.2, (16, 7))
        t0 = time.perf_counter()
        g.apply(N, pos, t, cur)
        ts.append((time.perf_counter() - t0) * 1e3)
    p50, p99 = pct(ts, 50, 99)
    # the nominal case: a chunk already within the limits (the action expert bounds its
    # chunks inside them), through the all-at-once check and, as the baseline in the same
    # run, through the point-by-point pass alone
    v = 0.5 * g.vmax * rng.uniform(-1, 1, 7)
    smooth = cur + np.outer(t + 0.02, v)
    exact = ClampGate(TABLETOP_ARM.joint_names, TABLETOP_ARM.limits, 0.02)
    exact._within_bounds = lambda *a: False
    timed = {}
    for name, gate in (('checked', g), ('point_by_point', exact)):
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            gate.apply(N, smooth, t, cur, v)
            ts.append((time.perf_counter() - t0) * 1e3)
        timed[name] = pct(ts, 50, 99)
    return {
        'p50': p50,
        'p99': p99,
        'feasible_p50': timed['checked'][0],
        'feasible_p99': timed['checked'][1],
        'feasible_point_by_point_p50': timed['point_by_point'][0],
    }


def bench_safety_stop(trials=20):
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState
    from std_srvs.srv import Trigger
    from trajectory_msgs.msg import JointTrajectory

    from harness_node.node import HarnessNode
    from wam_core.common.status import ERROR, OK
    from wam_util import convert as rc
    from wam_util.executors import make_executor, spin_slice

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    node = HarnessNode(
        parameter_overrides=[
            Parameter('planner.use_llm', value=False),
            # no action expert here: neither a chunk-gap hold nor a chunk timeout may fire
            # (the timeout must exceed the hold: the schema refuses anything else)
            Parameter('safety.chunk_hold_s', value=60.0),
            Parameter('safety.chunk_timeout_s', value=120.0),
        ]
    )
    probe = rclpy.create_node('bench_probe')
    holds = []
    probe.create_subscription(
        JointTrajectory,
        '/arm_controller/joint_trajectory',
        lambda m: holds.append(time.perf_counter()),
        10,
    )
    js = probe.create_publisher(JointState, '/joint_states', qos_profile_sensor_data)
    diag = probe.create_publisher(DiagnosticArray, '/diagnostics', 10)
    reset = probe.create_client(Trigger, '/harness/reset')
    ex = make_executor()
    ex.add_node(node)
    ex.add_node(probe)

    def spin(s):
        end = time.monotonic() + s
        while time.monotonic() < end:
            spin_slice(ex, 0.005)

    def status(level):
        return rc.diagnostic_array(
            time.time_ns(),
            [
                rc.diagnostic_status('world_expert: world expert', 'w', OK, 'ok', []),
                rc.diagnostic_status('action_expert: action expert', 'a', level, 'injected', []),
            ],
        )

    spin(1.0)
    js.publish(JointState(name=list(TABLETOP_ARM.joint_names), position=[0.0] * 6 + [0.02]))
    lat = []
    try:
        for _ in range(trials):
            diag.publish(status(OK))
            spin(0.1)
            fut = reset.call_async(Trigger.Request())
            while not fut.done():
                spin_slice(ex, 0.01)
            assert fut.result().success, fut.result().message
            n = len(holds)
            t0 = time.perf_counter()
            diag.publish(status(ERROR))
            while len(holds) == n and time.perf_counter() - t0 < 1.0:
                spin_slice(ex, 0.001)
            if len(holds) == n:
                raise RuntimeError('no hold within 1 s of the ERROR diagnostic')
            lat.append((holds[n] - t0) * 1e3)
    finally:
        ex.shutdown()
        node.destroy_node()
        probe.destroy_node()
        rclpy.try_shutdown()
    return {'p50': float(np.median(lat)), 'max': float(np.max(lat)), 'trials': trials}


def main() -> int:
    out = {}
    print('rule planner ...', flush=True)
    out['plan_rules_ms'] = bench_rules()
    print('embeddings ...', flush=True)
    out['embed_ms'] = bench_embed()
    print('clamping gate ...', flush=True)
    out['clamp_ms_per_chunk'] = bench_clamp()
    print('safety stop through rclpy ...', flush=True)
    out['safety_stop_latency_ms'] = bench_safety_stop()
    path = update_report('harness', out)
    print()
    print(
        f'{"rule plan ms p50 / p99":32}{out["plan_rules_ms"]["p50"]:8.3f} / '
        f'{out["plan_rules_ms"]["p99"]:.3f}'
    )
    print(
        f'{"embed ms cold / warm p50":32}{out["embed_ms"]["cold"]:8.2f} / '
        f'{out["embed_ms"]["warm_p50"]:.4f}'
    )
    print(
        f'{"clamp ms per chunk p50 / p99":32}{out["clamp_ms_per_chunk"]["p50"]:8.3f} / '
        f'{out["clamp_ms_per_chunk"]["p99"]:.3f}'
    )
    c = out['clamp_ms_per_chunk']
    print(
        f'{"  within the limits p50 / p99":32}{c["feasible_p50"]:8.3f} / '
        f'{c["feasible_p99"]:.3f}   (point by point: p50 {c["feasible_point_by_point_p50"]:.3f}, '
        f'{c["feasible_point_by_point_p50"] / c["feasible_p50"]:.1f}x)'
    )
    print(
        f'{"safety stop ms p50 / max":32}{out["safety_stop_latency_ms"]["p50"]:8.2f} / '
        f'{out["safety_stop_latency_ms"]["max"]:.2f}   (target max <= 40 ms)'
    )
    print(f'\nwrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
