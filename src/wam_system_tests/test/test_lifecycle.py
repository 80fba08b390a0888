"""Lifecycle transitions can be cycled: what a transition creates its mirror destroys.

configure -> activate -> deactivate -> cleanup, three times, on both experts (the
releases issue switches models exactly this way): afterwards one message still reaches
one callback, and no subscription, publisher, timer, thread or shared-memory segment is
left over from an earlier cycle (issue 24, item 5: a second configure used to add a
second set of subscriptions, so every message was handled twice).
"""

import os
import random
import threading
import time
import uuid

import pytest
import rclpy
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image, JointState

from action_expert_node.node import ActionExpertNode
from wam_core.cache.shm import shm_path
from wam_core.common.robot import TABLETOP_ARM
from wam_util import qos
from wam_util.executors import make_executor, spin_slice
from world_expert_node.node import WorldExpertNode

OK = TransitionCallbackReturn.SUCCESS


@pytest.fixture
def ros():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    yield
    rclpy.try_shutdown()


def _spin(ex, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        spin_slice(ex, 0.02)


def _entities(node):
    return (
        len(list(node.subscriptions)),
        len(list(node.publishers)),
        len(list(node.timers)),
    )


def _cycle(node, ex, times=3):
    for _ in range(times):
        assert node.trigger_configure() == OK
        assert node.trigger_activate() == OK
        _spin(ex, 0.2)
        assert node.trigger_deactivate() == OK
        assert node.trigger_cleanup() == OK


@pytest.mark.parametrize('kind', ['world', 'action'])
def test_transitions_cycle_without_leaking(ros, kind):
    segment = f'wam_test_lc_{uuid.uuid4().hex[:8]}'
    params = [
        Parameter('repr_cache.backend', value='shm'),
        Parameter('repr_cache.shm_name', value=segment),
        Parameter('warmup_requests', value=1),
    ]
    node = (WorldExpertNode if kind == 'world' else ActionExpertNode)(parameter_overrides=params)
    probe = rclpy.create_node('probe')
    ex = make_executor()
    ex.add_node(node)
    ex.add_node(probe)
    entities0 = _entities(node)
    try:
        # the first load may start a library's own helper thread once (tqdm's monitor):
        # threads are counted from after the first cycle
        _cycle(node, ex, 1)
        threads0 = threading.active_count()
        _cycle(node, ex, 2)
        assert _entities(node) == entities0, (kind, _entities(node), entities0)
        assert threading.active_count() == threads0
        ours = {'world_encoder', 'action_expert_tick', 'action_decode'}
        assert not [t.name for t in threading.enumerate() if t.name in ours]
        assert not os.path.exists(shm_path(segment))
        # once more up: one message, one callback
        assert node.trigger_configure() == OK and node.trigger_activate() == OK
        if kind == 'world':
            pub = probe.create_publisher(Image, '/camera/image_raw', qos.NEWEST_FRAME)
            meter = node._frame_rates[node.robots[0]]
            msg = Image(encoding='rgb8', height=8, width=8, step=24, data=bytes(192))
        else:
            pub = probe.create_publisher(JointState, '/joint_states', qos.SENSOR)
            meter = node._joint_rate
            msg = JointState(name=list(TABLETOP_ARM.joint_names), position=[0.0] * 7)
        end = time.monotonic() + 5
        while pub.get_subscription_count() == 0 and time.monotonic() < end:
            _spin(ex, 0.05)
        n0 = meter.count
        pub.publish(msg)
        _spin(ex, 0.5)
        assert meter.count - n0 == 1, f'{meter.count - n0} callbacks for one message'
        assert node.trigger_deactivate() == OK and node.trigger_cleanup() == OK
        assert threading.active_count() == threads0
    finally:
        ex.shutdown()
        node.destroy_node()
        probe.destroy_node()
        if os.path.exists(shm_path(segment)):
            os.unlink(shm_path(segment))
