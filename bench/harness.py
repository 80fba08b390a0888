#!/usr/bin/env python3
"""Harness benchmark -> the "harness" section of bench/report.json.

plan_rules_ms: the rule planner over a mix of English and Chinese instructions.
embed_ms: cold = first embedding of a new sentence (a MiniLM forward), warm = LRU hit.
clamp_ms_per_chunk: the clamping gate on raw 16x7 chunks: noise (clamped at every point,
  p50/p99), and a chunk within the limits (feasible_*), also through the point-by-point
  pass alone in the same run (feasible_point_by_point_p50: the baseline).
safety_stop_latency_ms: through real rclpy, from an ERROR diagnostic published by a
  probe to the hold trajectory arriving back at the probe (20 trials, reset between).
gate_while_planning: the gate in node processes while the task manager plans without
  pause (an /instruction every 20 ms, each with a word MiniLM has not embedded yet: a
  cold forward each time). ``split``: the gate and the task manager in processes of their
  own (the stack's arrangement); ``shared``: both nodes on one executor in one process
  (the harness before issue 24 split it), as the baseline in the same run. For each, the
  stop latency (ERROR diagnostic -> hold at the probe) and a raw chunk's pass through the
  gate (published -> forwarded chunk at the probe), p50/p99/max, over the same trials.
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


def experts_reporting(level):
    """/diagnostics as the two experts would send it, the action expert at ``level``."""
    from wam_core.common.status import OK
    from wam_util import convert as rc

    return rc.diagnostic_array(
        time.time_ns(),
        [
            rc.diagnostic_status('world_expert: world expert', 'w', OK, 'ok', []),
            rc.diagnostic_status('action_expert: action expert', 'a', level, 'injected', []),
        ],
    )


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
    from wam_util.executors import make_executor, spin_slice

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    node = HarnessNode(
        parameter_overrides=[
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

    spin(1.0)
    js.publish(JointState(name=list(TABLETOP_ARM.joint_names), position=[0.0] * 6 + [0.02]))
    lat = []
    try:
        for _ in range(trials):
            diag.publish(experts_reporting(OK))
            spin(0.1)
            fut = reset.call_async(Trigger.Request())
            while not fut.done():
                spin_slice(ex, 0.01)
            assert fut.result().success, fut.result().message
            n = len(holds)
            t0 = time.perf_counter()
            diag.publish(experts_reporting(ERROR))
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


# no action expert: neither a chunk-gap hold nor a chunk timeout may fire (the timeout
# must exceed the hold); the rules plan (no LLM), and each task ends at once
CHILD_PARAMS = [
    'harness:safety.chunk_hold_s:=60.0',
    'harness:safety.chunk_timeout_s:=120.0',
    'task_manager:planner.use_llm:=false',
    'task_manager:task.subtask_duration_s:=0.01',
]


def serve_shared(ros_args: list[str]) -> int:
    """The baseline: the gate and the task manager on one executor in this process."""
    import rclpy

    from harness_node.node import HarnessNode
    from harness_node.task_node import TaskManagerNode
    from wam_core.serving.interpreter import freeze_heap
    from wam_util.executors import make_executor, spin_until_shutdown

    rclpy.init(args=['shared', *ros_args])
    nodes = [HarnessNode(), TaskManagerNode()]
    ex = make_executor()
    for n in nodes:
        ex.add_node(n)
    freeze_heap()  # as run_node does for every node process
    try:
        spin_until_shutdown(ex)  # (the EventsExecutor's spin() fires no timers)
    finally:
        ex.shutdown()
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown()
    return 0


def _children(arrangement: str, ros_args: list[str]) -> list:
    import subprocess

    from wam_core.common.process import dying_with_parent

    env = dict(os.environ, PYTHONUNBUFFERED='1')
    if arrangement == 'shared':
        cmds = [[__file__, '--serve-shared']]
    else:
        cmds = [['-m', 'harness_node.node'], ['-m', 'harness_node.task_node']]
    return [
        subprocess.Popen(
            dying_with_parent([sys.executable, *c, *ros_args]),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for c in cmds
    ]


def bench_gate_while_planning(arrangement: str, trials: int = 40) -> dict:
    """Stop latency and chunk pass-through of the gate while the task manager plans."""
    import signal

    import rclpy
    from builtin_interfaces.msg import Duration
    from diagnostic_msgs.msg import DiagnosticArray
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String
    from std_srvs.srv import Trigger
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from wam_core.common.paths import default_config
    from wam_core.common.status import ERROR, OK
    from wam_util import convert as rc
    from wam_util import qos
    from wam_util.executors import make_executor, spin_slice

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    ros_args = ['--ros-args', '--params-file', default_config()]
    for p in CHILD_PARAMS:
        ros_args += ['-p', p]
    procs = _children(arrangement, ros_args)
    rclpy.init()
    probe = rclpy.create_node('bench_probe')
    names = list(TABLETOP_ARM.joint_names)
    q = [0.0] * 6 + [0.02]
    arrivals: list[tuple[int, float]] = []  # (points, when)
    probe.create_subscription(
        JointTrajectory,
        '/arm_controller/joint_trajectory',
        lambda m: arrivals.append((len(m.points), time.perf_counter())),
        50,
    )
    js = probe.create_publisher(JointState, '/joint_states', qos.SENSOR)
    diag = probe.create_publisher(DiagnosticArray, '/diagnostics', 10)
    raw = probe.create_publisher(JointTrajectory, '/action_expert/raw_chunk', qos.EVENTS)
    instr = probe.create_publisher(String, '/instruction', qos.EVENTS)
    reset = probe.create_client(Trigger, '/harness/reset')
    rng = random.Random(0)
    planned = [0]

    def load() -> None:  # a word never seen: MiniLM embeds it cold in the task manager
        word = ''.join(rng.choice('bcdfghjklmnpqrstvwxz') for _ in range(7))
        instr.publish(String(data=f'put the {word} in the fridge'))
        planned[0] += 1

    ex = make_executor()
    ex.add_node(probe)

    def spin(s: float) -> None:
        end = time.perf_counter() + s
        while time.perf_counter() < end:
            spin_slice(ex, 0.002)

    def still_chunk() -> JointTrajectory:
        msg = JointTrajectory(joint_names=names)
        msg.header.stamp = rc.ns_to_stamp(time.time_ns())
        for i in range(16):
            t = Duration(sec=0, nanosec=int((i + 1) * 20e6))
            msg.points.append(JointTrajectoryPoint(positions=q, time_from_start=t))
        return msg

    def wait_arrival(n: int, points_ok, limit: float = 1.0) -> float | None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < limit:
            for pts, when in arrivals[n:]:
                if points_ok(pts):
                    return when
            spin_slice(ex, 0.0005)
        return None

    stop, through = [], []
    try:
        end = time.monotonic() + 60
        while not (reset.service_is_ready() and instr.get_subscription_count() > 0):
            if time.monotonic() > end:
                raise RuntimeError(f'{arrangement}: the gate and task manager did not come up')
            spin(0.1)
        js.publish(JointState(name=names, position=q))
        probe.create_timer(0.02, load)
        spin(2.0)  # the load running
        for _ in range(trials):
            js.publish(JointState(name=names, position=q))
            diag.publish(experts_reporting(OK))
            spin(0.05)
            fut = reset.call_async(Trigger.Request())
            t_end = time.perf_counter() + 5
            while not fut.done() and time.perf_counter() < t_end:
                spin_slice(ex, 0.005)
            if not fut.done():
                raise RuntimeError(f'{arrangement}: the reset was not answered within 5 s')
            if not fut.result().success:
                raise RuntimeError(f'{arrangement}: reset refused: {fut.result().message}')
            for _ in range(5):
                n = len(arrivals)
                t0 = time.perf_counter()
                raw.publish(still_chunk())
                when = wait_arrival(n, lambda pts: pts == 16)
                if when is None:
                    raise RuntimeError(f'{arrangement}: a chunk was not forwarded within 1 s')
                through.append((when - t0) * 1e3)
                spin(0.02)
            n = len(arrivals)
            t0 = time.perf_counter()
            diag.publish(experts_reporting(ERROR))
            when = wait_arrival(n, lambda pts: pts == 1)
            if when is None:
                raise RuntimeError(f'{arrangement}: no hold within 1 s of the ERROR diagnostic')
            stop.append((when - t0) * 1e3)
    finally:
        ex.shutdown()
        probe.destroy_node()
        rclpy.try_shutdown()
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(timeout=10)
            except Exception:
                p.kill()

    def summary(xs):
        p50, p99 = pct(xs, 50, 99)
        return {'p50': p50, 'p99': p99, 'max': float(np.max(xs)), 'samples': len(xs)}

    return {
        'stop_ms': summary(stop),
        'chunk_through_ms': summary(through),
        'instructions_sent': planned[0],
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == '--serve-shared':
        return serve_shared(sys.argv[2:])
    out = {}
    print('rule planner ...', flush=True)
    out['plan_rules_ms'] = bench_rules()
    print('embeddings ...', flush=True)
    out['embed_ms'] = bench_embed()
    print('clamping gate ...', flush=True)
    out['clamp_ms_per_chunk'] = bench_clamp()
    print('safety stop through rclpy ...', flush=True)
    out['safety_stop_latency_ms'] = bench_safety_stop()
    out['gate_while_planning'] = {}
    for arrangement in ('split', 'shared'):
        print(f'the gate while the task manager plans ({arrangement}) ...', flush=True)
        out['gate_while_planning'][arrangement] = bench_gate_while_planning(arrangement)
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
    g = out['gate_while_planning']
    for key, label in (('stop_ms', 'stop'), ('chunk_through_ms', 'chunk through the gate')):
        for arrangement in ('split', 'shared'):
            f = g[arrangement][key]
            print(
                f'{f"while planning, {label} ms p50/p99/max ({arrangement})":64}'
                f'{f["p50"]:6.2f} / {f["p99"]:6.2f} / {f["max"]:6.2f}'
            )
        ratio = g['shared'][key]['p99'] / g['split'][key]['p99']
        print(f'{"  p99 shared / split":64}{ratio:6.2f}x')
    print(f'\nwrote {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
