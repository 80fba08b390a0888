"""The tiny π0 in the running stack, through real rclpy and DDS: the world expert encodes
its VLM prefix once per observation (pixels and subtask), the action expert decodes off
the tick, and what reaches the robot is never late, never from a stale representation,
inside the limits and acceptable to joint_trajectory_controller."""

import os
import random

import numpy as np
import pytest
import yaml

from robot_agent.stack import Stack
from wam_core.cache.freshness import CameraPeriod, expected_ttl_ms, stale_bound_s
from wam_core.common.config import ActionExpertParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config
from wam_core.control.limits import ClampGate
from wam_core.models.pi0.write import write_pi0
from wam_system_tests.fault_recorder import Recorder
from wam_util import convert

CONFIG = default_config()


@pytest.fixture(scope='module')
def overlay(tmp_path_factory):
    """config/pi0.yaml's settings, serving a tiny π0 written for this test."""
    root = tmp_path_factory.mktemp('pi0')
    model = write_pi0(str(root / 'tiny'), 'tiny', ('front', 'wrist'), log=lambda *a: None)
    doc = {
        '/**/world_expert': {'ros__parameters': {'model_dir': model['dir']}},
        '/**/action_expert': {'ros__parameters': {'model_dir': model['dir']}},
    }
    path = root / 'pi0.yaml'
    path.write_text(yaml.safe_dump(doc))
    return {'path': str(path), 'version': model['version']}


@pytest.fixture(autouse=True)
def domain():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))


@pytest.mark.parametrize('mode', ['single', 'multi'])
def test_tiny_pi0_serves_the_stack_never_late_never_stale(overlay, mode):
    stack = Stack(mode, CONFIG, overlays=[overlay['path']])
    cfg = load_params([CONFIG, overlay['path']], 'action_expert', ActionExpertParams)
    limits = ClampGate(cfg.robot.joint_names, cfg.joint_limits, cfg.control.period_s)
    world = load_params([CONFIG, overlay['path']], 'world_expert', WorldExpertParams)
    ttl_ms = expected_ttl_ms(world, cfg)  # auto: a 30 Hz camera's period + 40 ms
    rec = Recorder(stack, overlay['version'], stale_bound_s(ttl_ms, cfg.control.period_s), limits)
    if mode == 'multi':
        rec.watch_cache('wam_repr')  # the ring the action expert reads
    try:
        stack.wait_ready(90)
        stack.spin_for(3.0)  # the harness clears its start-up stop
        m = stack.monitor
        c0, f0 = m.chunks, m.forwarded
        stack.spin_for(20.0, until=lambda: m.forwarded - f0 >= 60)
        stack.spin_for(1.2)  # a status with the final counters
        a, w = m.action, m.world
        assert a.decode_mode == 'async', a.message
        assert m.chunks - c0 >= 30 and m.forwarded - f0 >= 30, (m.chunks - c0, m.forwarded)
        assert a.late_stamps == 0  # no chunk left after its own stamp
        assert rec.unsafe == 0  # no forwarded point outside the joint limits
        assert m.conformance.total == 0 and rec.conformance_all.total == 0, m.last_violations
        stale = [s for t, n, s in rec.forwarded if n > 1 and rec.stale(s, t)]
        assert stale == [], f'{len(stale)} of {len(rec.forwarded)} forwarded chunks'
        age = convert.latency_of(a.latency, 'repr_age')
        # read within the TTL the world expert announced (auto: its camera's period + 40 ms)
        assert a.ttl_ms == pytest.approx(ttl_ms, abs=5.0)
        # (the TTL in force moves only in steps of more than CameraPeriod.STEP_MS: a read
        # judged by the one before the last step may be that much older than this one)
        assert age.samples > 0 and age.max_ms <= a.ttl_ms + CameraPeriod.STEP_MS
        # one prefix per distinct observation (pixels and subtask); the π0 prefix's size
        assert w.calls_per_distinct_frame == pytest.approx(1.0)
        assert w.world_calls > 50
        decode = convert.latency_of(a.latency, 'decode')
        assert decode.samples > 0 and decode.p50_ms > 0
        # the chunk is the model's 50 rows from the stamp on, and a braking tail
        msg = m.last_full_chunk
        assert len(msg.points) >= 40 and all(len(p.positions) == 7 for p in msg.points)
        assert np.allclose(msg.points[-1].velocities, 0.0)
        print(
            f'\n{mode}: chunks {m.chunks - c0} at {a.chunk_rate_hz:.1f} Hz '
            f'(expected {a.expected_chunk_hz:.1f}), decode p50/p99 {decode.p50_ms:.1f}/'
            f'{decode.p99_ms:.1f} ms, degraded {a.degraded_ticks} of {a.ticks} ticks, '
            f'repr age max {age.max_ms:.1f} ms, forwarded {len(rec.forwarded)}'
        )
    finally:
        stack.shutdown()
