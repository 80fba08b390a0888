"""Two camera views through the whole stack: the simulated robot's front and wrist
cameras, one observation per stamp, encoded once, and a stalled view holds the robot
with its own reason counted."""

import os
import random

import pytest

from robot_agent.stack import Stack, override
from wam_core.common.paths import default_config
from wam_core.models.default_models import write_default_models
from wam_interfaces.msg import RepresentationDescriptor
from wam_util import qos

CONFIG = default_config()


@pytest.fixture(scope='module')
def two_view(tmp_path_factory):
    return write_default_models(str(tmp_path_factory.mktemp('m2')), views=('front', 'wrist'))


def test_two_views_are_served_as_one_observation_and_a_stalled_view_holds(two_view):
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    args = override('world_expert', 'model_dir', two_view['world_dir'])
    args += override('action_expert', 'model_dir', two_view['action_dir'])
    args += ['-p', 'sim_robot:cameras:=[front,wrist]']
    stack = Stack('single', CONFIG, extra_args=args, robot='sim')
    seen = []
    stack.monitor.create_subscription(
        RepresentationDescriptor,
        'world_expert/representation',
        lambda m: seen.append(list(m.views)),
        qos.EVENTS,
    )
    try:
        stack.wait_ready(60)
        stack.spin_for(3.0)
        w = stack.monitor.world
        assert list(w.views) == ['front', 'wrist'] and seen and seen[-1] == ['front', 'wrist']
        assert w.world_calls > 30 and w.calls_per_distinct_frame == pytest.approx(1.0)
        e = stack.world.expert  # both views of an observation in one forward pass
        assert abs(e.forwards - e.calls) <= 1 and e.calls > 30  # (live counters: +-1)
        c0 = stack.monitor.chunks
        stack.spin_for(2.0)
        stack.spin_for(8.0, until=lambda: stack.monitor.chunks - c0 >= 20)  # a busy moment
        # chunks keep coming from two-view observations. Not a rate target (that is the
        # bench's): one process renders both cameras, encodes both views and ticks, so a
        # representation is often just past its 50 ms TTL (the last chunk runs open loop
        # then); ~32 Hz was measured here once and 16 Hz in a fresh-clone make test on a
        # slower afternoon, 7.5 Hz in one busier still: 20 chunks within 10 s
        assert stack.monitor.chunks - c0 >= 20, (stack.action.ticker.degraded, stack.monitor.holds)
        # the wrist camera stops: no complete observation, the representation ages past
        # its TTL and the action expert holds; the world expert names the missing view
        held = stack.action.stream.outcomes['held']
        stack.robot.paused_cameras.add('wrist')
        stack.spin_for(2.0)
        assert stack.action.stream.outcomes['held'] >= held + 30
        assert stack.action.ticker.degraded.get('stale', 0) > 0
        rejected = {r.reason: r.count for r in stack.monitor.world.rejected}
        assert rejected.get('view_missing:wrist', 0) >= 30, rejected
        assert stack.monitor.conformance.total == 0, stack.monitor.last_violations
    finally:
        stack.shutdown()
