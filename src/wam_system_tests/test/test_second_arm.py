"""Another arm is another URDF, not a code change (issue 24, item 3): the limits, the gate's
tolerances, the action expert's bounds and the model come from the description; a
configured limit wider than the URDF's is refused; the stack serves the second arm end to
end on the synthetic robot with a seeded model written for it."""

import os
import random

import numpy as np
import pytest
import rclpy
from std_msgs.msg import String

from harness_node.node import HarnessNode
from robot_agent.stack import Stack
from wam_core.common.config import ActionExpertParams, HarnessParams
from wam_core.common.params import ConfigError, load_params
from wam_core.common.paths import default_config
from wam_core.common.robot import description_of_file
from wam_core.models.action_expert import default_delta_scale
from wam_core.models.default_models import write_default_models
from wam_system_tests.second_arm import JOINTS, write_description, write_overlay
from wam_util import qos

CONFIG = default_config()


@pytest.fixture(scope='module')
def arm(tmp_path_factory):
    root = tmp_path_factory.mktemp('second_arm')
    urdf = write_description(str(root / 'description'))
    robot = description_of_file(urdf)
    models = write_default_models(str(root / 'models'), seed=3, robot=robot)
    overlay = write_overlay(
        str(root / 'second_arm.yaml'), urdf, models['world_dir'], models['action_dir']
    )
    return {'urdf': urdf, 'robot': robot, 'models': models, 'overlay': overlay, 'root': root}


def test_the_limits_and_bounds_come_from_the_description(arm):
    cfg = load_params([CONFIG, arm['overlay']], 'action_expert', ActionExpertParams)
    assert list(cfg.robot.joint_names) == JOINTS
    assert cfg.joint_limits['elbow'].velocity == 1.2 and cfg.joint_limits['elbow'].upper == 2.5
    assert cfg.joint_limits['finger'].acceleration == 1.0  # joint_limits.yaml beside the URDF
    # a prismatic joint is bounded in metres whatever its name
    assert default_delta_scale(arm['robot']) == [0.5] * 6 + [0.05]


def test_a_limit_wider_than_the_urdf_is_refused(arm):
    wide = arm['root'] / 'wide.yaml'
    wide.write_text(
        '/**:\n  ros__parameters:\n    joint_limits:\n      elbow: '
        '{lower: -2.5, upper: 2.5, velocity: 1.5, effort: 50.0, acceleration: 8.0}\n'
    )
    with pytest.raises(ConfigError, match=r'joint_limits.elbow: velocity wider than the URDF'):
        load_params([CONFIG, arm['overlay'], str(wide)], 'harness', HarnessParams)


def test_the_gate_takes_its_tolerances_from_the_description(arm):
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init(args=['--ros-args', '--params-file', CONFIG, '--params-file', arm['overlay']])
    try:
        node = HarnessNode()
        try:
            gate = node.gate
            assert gate.joint_names == JOINTS
            tol = dict(zip(gate.joint_names, gate.activity.tolerances, strict=True))
            assert tol['finger'] == 1e-4 and tol['elbow'] == 1e-3  # metres vs radians
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_the_stack_serves_the_second_arm_end_to_end(arm):
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    stack = Stack('single', CONFIG, overlays=[arm['overlay']])
    described = []
    stack.monitor.create_subscription(
        String, 'robot_description', lambda m: described.append(m.data), qos.LATCHED
    )
    try:
        stack.wait_ready(60)
        stack.spin_for(3.0)  # the harness clears its start-up stop
        m = stack.monitor
        c0, f0 = m.chunks, m.forwarded
        stack.spin_for(10.0, until=lambda: m.forwarded - f0 >= 50)
        assert m.chunks - c0 >= 50 and m.forwarded - f0 >= 50
        msg = m.last_full_chunk
        assert list(msg.joint_names) == JOINTS
        assert all(np.isfinite(p.positions).all() for p in msg.points)
        assert m.conformance.total == 0, m.last_violations
        assert described and '<robot name="second_arm">' in described[-1]
        assert stack.action.ticker.model.spec.joint_names == tuple(JOINTS)
    finally:
        stack.shutdown()
