"""A world-action model that is not the stack's own, registered by another package
(wam_plugin_example, through entry points), passes the conformance kit and is served by
the unchanged nodes: chunks reach the robot, the controller's rules hold, encode once."""

import os
import random

import pytest
from std_msgs.msg import String
from wam_plugin_example.experts import write_example_models

from robot_agent.stack import Stack, override
from wam_core.common.paths import default_config
from wam_core.models import check
from wam_core.models.registry import available
from wam_util import qos

CONFIG = default_config()


@pytest.fixture(scope='module')
def example(tmp_path_factory):
    return write_example_models(str(tmp_path_factory.mktemp('plugin')))


def test_the_plugin_types_come_from_entry_points():
    # registered in wam_plugin_example's setup.py, not in the stack
    assert available('wam.world_experts')['example_pooled_cnn'].startswith('wam_plugin_example')
    assert available('wam.action_experts')['example_linear_delta'].startswith('wam_plugin_example')


def test_the_plugin_pair_passes_the_conformance_kit(example):
    checks = check.check_dirs(example['world_dir'], example['action_dir'], CONFIG)
    # the latency verdict is this machine's load at the time: its figures must be there
    assert all(c.passed for c in check.untimed(checks)), check.table(checks)
    assert check.timed_ran(checks), check.table(checks)
    assert '(17, 32)' in checks[1].figure and 'delta' in checks[1].figure


def test_the_unchanged_nodes_serve_the_plugin_pair(example):
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    args = override('world_expert', 'model_dir', example['world_dir'])
    args += override('action_expert', 'model_dir', example['action_dir'])
    stack = Stack('single', CONFIG, extra_args=args)
    described = []
    stack.monitor.create_subscription(
        String, 'robot_description', lambda m: described.append(m.data), qos.LATCHED
    )
    try:
        stack.wait_ready(60)
        stack.spin_for(3.0)  # the harness clears its start-up stop
        c0, f0 = stack.monitor.chunks, stack.monitor.forwarded
        stack.spin_for(4.0)
        assert stack.world.expert.name == 'example-pooled-cnn'
        assert stack.action.ticker.model.name == 'example-linear-delta'
        assert stack.monitor.chunks - c0 >= 120, stack.monitor.chunks - c0
        assert stack.monitor.forwarded - f0 >= 100
        msg = stack.monitor.last_full_chunk
        # a 10-step model: points from the stamp's lead on, then the braking tail
        assert 8 <= len(msg.points) <= 40 and all(len(p.positions) == 7 for p in msg.points)
        assert stack.monitor.conformance.total == 0, stack.monitor.last_violations
        enc = stack.world.encoder
        assert enc.world_calls == enc.frames - enc.hits and enc.world_calls > 50
        # deltas of at most 1 cm / 0.01 rad per step: the robot stays near its start
        q = stack.action.ticker.joint_positions
        assert q is not None and abs(q[0]) < 0.5
        # the harness publishes the URDF, latched, as robot_state_publisher does
        assert described and '<robot name="tabletop_arm">' in described[-1]
    finally:
        stack.shutdown()
