"""Harness through real rclpy: clamping gate, safety stop from diagnostics and silence, reset."""

import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from harness_node.node import HarnessNode
from wam_core.common.robot import TABLETOP_ARM
from wam_core.common.status import ERROR, OK
from wam_core.control.trajectory import Trajectory
from wam_util import convert as rc
from wam_util import qos
from wam_util.executors import make_executor, spin_slice

NAMES = list(TABLETOP_ARM.joint_names)
Q = [0.1] * 6 + [0.02]  # inside every limit (the gripper's is 0..0.04 m)


@pytest.fixture
def rig():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    node = HarnessNode(
        parameter_overrides=[
            Parameter('safety.chunk_hold_s', value=0.6),
            Parameter('safety.chunk_timeout_s', value=0.7),
            Parameter('safety.holdoff_s', value=60.0),
            Parameter('safety.silence_timeout_s', value=30.0),
        ]
    )
    probe = rclpy.create_node('probe')
    r = type('Rig', (), {})()
    r.node, r.probe = node, probe
    r.out, r.stop = [], []
    probe.create_subscription(
        JointTrajectory, '/arm_controller/joint_trajectory', r.out.append, 100
    )
    probe.create_subscription(
        Bool,
        '/safety/stop',
        lambda m: r.stop.append(m.data),
        qos.LATCHED,
    )
    r.js = probe.create_publisher(JointState, '/joint_states', qos.SENSOR)
    r.raw = probe.create_publisher(JointTrajectory, '/action_expert/raw_chunk', 10)
    r.diag = probe.create_publisher(DiagnosticArray, '/diagnostics', 10)
    r.reset = probe.create_client(Trigger, '/harness/reset')
    r.ex = make_executor()
    r.ex.add_node(node)
    r.ex.add_node(probe)
    yield r
    r.ex.shutdown()
    node.destroy_node()
    probe.destroy_node()
    rclpy.try_shutdown()


def spin(r, s):
    end = time.monotonic() + s
    while time.monotonic() < end:
        spin_slice(r.ex, 0.01)


def diag(r, action_level=OK, message='ok'):
    r.diag.publish(
        rc.diagnostic_array(
            time.time_ns(),
            [
                rc.diagnostic_status('world_expert: world expert', 'w', OK, 'ok', []),
                rc.diagnostic_status(
                    'action_expert: action expert', 'a', action_level, message, []
                ),
            ],
        )
    )


def chunk(r, positions):
    """Stamped ahead, as the action expert stamps its chunks (tick + lead periods): more
    than a period of it is left when the gate gets it, even a one-point chunk."""
    stamp = time.time_ns() + 60_000_000
    r.raw.publish(rc.joint_trajectory(NAMES, np.array(positions), stamp, 0.02))


def forwarded(r):
    """What the gate forwarded from the raw chunks (its own holds are stamped 0, "now")."""
    return [m for m in r.out if rc.stamp_to_ns(m.header.stamp) != 0]


def call_reset(r):
    fut = r.reset.call_async(Trigger.Request())
    end = time.monotonic() + 5
    while not fut.done() and time.monotonic() < end:
        spin_slice(r.ex, 0.02)
    return fut.result()


def running_at_q(r, q=Q):
    """The gate running (reset after the nodes' OK), the robot at ``q``."""
    spin(r, 0.5)
    r.js.publish(JointState(name=NAMES, position=q))
    diag(r)
    spin(r, 0.2)
    assert call_reset(r).success
    spin(r, 0.1)
    return r


def test_gate_clamps_rejects_and_safety_stop_cycle(rig):
    r = rig
    spin(r, 0.5)
    r.js.publish(JointState(name=NAMES, position=[0.0] * 7))
    spin(r, 0.1)
    assert r.stop[-1] is True  # starts stopped until the nodes report OK
    chunk(r, [[0.0] * 7])
    spin(r, 0.1)
    assert r.out == []
    diag(r)
    spin(r, 0.2)
    assert call_reset(r).success  # hold-off is 60 s here: reset instead
    spin(r, 0.1)
    assert r.stop[-1] is False
    # a jump of 1 rad in one 20 ms step is clamped to the velocity limit (1.5 rad/s)
    chunk(r, [[1.0] + [0.0] * 6, [1.0] + [0.0] * 6])
    spin(r, 0.2)
    assert len(forwarded(r)) == 1
    p = [pt.positions[0] for pt in forwarded(r)[-1].points]
    assert p[0] == pytest.approx(0.03, abs=1e-6) and p[1] - p[0] <= 0.03 + 1e-6
    assert r.node.gate.clamp.clamped_points == 2
    # NaN chunk and wrong joints never reach the robot
    chunk(r, [[math.nan] + [0.0] * 6])
    bad = rc.joint_trajectory(NAMES[:6], np.zeros((1, 6)), time.time_ns() + 60_000_000, 0.02)
    r.raw.publish(bad)
    spin(r, 0.2)
    assert len(forwarded(r)) == 1
    assert r.node.gate.clamp.rejected == {'non_finite': 1, 'joint_names': 1}
    # the chunk's horizon ran out (its last point is 20 ms after its stamp): a braking hold
    # (again after each raw chunk, here the two rejected ones), at rest where it ended
    gap = [m for m in r.out if m not in forwarded(r)]
    assert 1 <= len(gap) == r.node.gate.monitor.gap_holds <= 3
    assert all(m.points[0].positions[0] == pytest.approx(p[1]) for m in gap)
    # ERROR from a required node -> latched stop + a hold at the commanded position (the
    # clamped chunk ended at 0.06, the arm is measured 0.04 away: no jump to it), at rest;
    # chunks refused
    r.js.publish(JointState(name=NAMES, position=Q))
    spin(r, 0.1)
    diag(r, ERROR, 'model exploded')
    spin(r, 0.2)
    assert r.stop[-1] is True
    hold = r.out[-1]
    assert len(hold.points) == 1 and hold.points[0].positions[0] == pytest.approx(p[1])
    assert list(hold.points[0].velocities) == [0.0] * 7
    n = len(forwarded(r))
    chunk(r, [Q])
    spin(r, 0.2)
    assert len(forwarded(r)) == n and r.node.gate.refused_while_stopped >= 1
    assert r.node.gate.stop_latency_ms.summary()['max'] < 40
    # reset refused while the ERROR stands, accepted once OK again
    res = call_reset(r)
    assert not res.success and 'model exploded' in res.message
    diag(r)
    chunk(r, [Q])
    spin(r, 0.2)
    res = call_reset(r)
    assert res.success, res.message
    spin(r, 0.1)
    assert r.stop[-1] is False
    chunk(r, [Q])
    spin(r, 0.2)
    assert len(forwarded(r)) == n + 1 and r.node.gate.clamp.rejected == {
        'non_finite': 1,
        'joint_names': 1,
    }
    # silence of the action expert's chunks stops the robot too
    spin(r, 0.9)
    assert (
        r.node.gate.monitor.stopped
        and 'no action chunk' in r.node.gate.monitor.reason
        and r.stop[-1] is True
    )


def test_a_world_version_the_action_expert_does_not_accept_stops_the_robot(rig):
    """The versions come from the experts' typed statuses, not from diagnostic labels."""
    from wam_interfaces.msg import ActionExpertStatus, WorldExpertStatus

    r = rig
    world = r.probe.create_publisher(WorldExpertStatus, '/world_expert/status', 10)
    action = r.probe.create_publisher(ActionExpertStatus, '/action_expert/status', 10)
    spin(r, 0.5)
    r.js.publish(JointState(name=NAMES, position=Q))
    diag(r)
    world.publish(WorldExpertStatus(model_version='v1'))
    action.publish(ActionExpertStatus(world_version_accepted='v1'))
    spin(r, 0.3)
    assert call_reset(r).success
    spin(r, 0.1)
    assert r.stop[-1] is False and not r.node.gate.monitor.stopped
    world.publish(WorldExpertStatus(model_version='v2'))
    spin(r, 0.3)
    assert r.node.gate.monitor.stopped and 'version mismatch' in r.node.gate.monitor.reason
    assert r.stop[-1] is True


def test_a_chunk_whose_end_passes_while_the_gate_works_on_it_is_not_forwarded(rig):
    """Lateness is judged when the chunk is sent, not when it arrived: a process stalled
    inside the gate (here: the clamp made to take 100 ms) must not forward a chunk whose
    last point has passed, which the controller rejects as ending in the past."""
    r = running_at_q(rig)
    # point 0 applied 200 ms before arrival: stale on receipt
    r.raw.publish(rc.joint_trajectory(NAMES, np.array([Q, Q]), time.time_ns() - 200_000_000, 0.02))
    spin(r, 0.2)
    assert forwarded(r) == [] and r.node.gate.clamp.rejected == {'late': 1}
    apply = r.node.gate.clamp.apply

    def slow_apply(*args, **kwargs):
        time.sleep(0.1)
        return apply(*args, **kwargs)

    r.node.gate.clamp.apply = slow_apply
    chunk(r, [Q, Q])  # ends 80 ms after it is sent: fresh on arrival, past when clamped
    spin(r, 0.3)
    assert forwarded(r) == [] and r.node.gate.clamp.rejected == {'late': 2}
    r.node.gate.clamp.apply = apply
    chunk(r, [Q, Q])
    spin(r, 0.2)
    assert len(forwarded(r)) == 1


def test_holds_at_a_robot_that_left_its_command_are_all_forwarded(rig):
    """A robot more than max_command_deviation from its command (blocked, or a synthetic
    robot that does not follow) gets chunks bounded from its measured position. The
    action expert's holds there (one point, two periods ahead, each tick) were refused
    as infeasible from the second one on: the first was recorded as running from the
    abandoned command, so the second's baseline lay on that way, at ~6 rad/s (4-robot
    fleets, 2026-12-07)."""
    r = running_at_q(rig)
    # the command: joint 1 at 1 rad/s for 0.8 s
    s0 = time.time() + 0.06
    moving = np.array([Q] * 40)
    moving[:, 0] += 0.02 * np.arange(40)
    r.raw.publish(rc.joint_trajectory(NAMES, moving, int(s0 * 1e9), 0.02))
    spin(r, 0.1)
    assert len(forwarded(r)) == 1
    # the robot stays 0.17 rad behind where its command is at s1 (past the 0.15 default)
    s1 = time.time() + 0.25
    here = list(Q)
    here[0] = Q[0] + (s1 - s0) - 0.17
    r.js.publish(JointState(name=NAMES, position=here))
    spin(r, 0.1)
    for stamp in (s1, s1 + 0.02):  # two ticks' holds at the measured position
        hold = rc.timed_trajectory(
            NAMES, Trajectory(stamp, np.array([0.04]), np.array([here]), np.zeros((1, 7)))
        )
        r.raw.publish(hold)
    spin(r, 0.2)
    assert r.node.gate.clamp.rejected == {}
    assert len(forwarded(r)) == 3


def test_the_status_names_the_joints_a_chunk_leaves_at_a_limit(rig):
    """Per joint: the forwarded points at (within 2 % of) a limit, and the joints the
    latest chunk ends there; a canary leaves a joint the live release parked out."""
    parked = list(Q)
    parked[5] = 2.85  # arm_joint_6, 0.05 rad from its 2.9 rad stop
    r = running_at_q(rig, parked)
    chunk(r, [parked, parked])
    spin(r, 0.2)
    status = r.node.gate._status()
    assert list(status.joints_at_limit) == ['arm_joint_6'], status.joints_at_limit
    counts = {a.joint: a.commands_at_limit for a in status.gate_activity}
    assert counts == {**{j: 0 for j in NAMES}, 'arm_joint_6': 2}
    assert status.commands_at_limit == 2
    leaving = np.array([parked] * 12)
    leaving[:, 5] = np.linspace(2.85, 2.6, 12)  # out of the margin (< 2.784) on its way
    chunk(r, leaving)
    spin(r, 0.2)
    status = r.node.gate._status()
    assert r.node.gate.clamp.rejected == {}
    assert list(status.joints_at_limit) == [], forwarded(r)[-1].points[-1].positions
    assert 2 < status.commands_at_limit < 14


def test_a_chunk_bounded_from_the_measured_position_starts_at_its_own_velocity(rig):
    """With no command to follow (here: the robot 0.3 rad from the gate's start-up hold)
    the gate bounds a chunk from the measured position, velocity unknown. Forwarded with
    point 0 at rest while it moves at 1.4 rad/s from there, its first segment's cubic
    peaked at 1.75 rad/s, and the next chunk, bounded from that, was refused as
    infeasible (instance_kill, 2026-12-07)."""
    r = running_at_q(rig)
    here = list(Q)
    here[0] += 0.3
    r.js.publish(JointState(name=NAMES, position=here))
    spin(r, 0.1)
    s1 = time.time() + 0.1
    times = 0.02 * np.arange(16)
    moving = np.array([here] * 16)
    # arm_joint_1 at 1.4 rad/s (its limit 1.5, 8 rad/s^2), point 0 a period's travel
    # ahead of the measured position (the gate's first segment, from there)
    moving[:, 0] += 1.4 * (times + 0.02)
    vel = np.zeros_like(moving)
    vel[:-1, 0] = 1.4
    r.raw.publish(rc.timed_trajectory(NAMES, Trajectory(s1, times, moving, vel)))
    spin(r, 0.05)
    # the next tick's chunk, 10 ms on: mid-way through the first one's first segment
    r.raw.publish(rc.timed_trajectory(NAMES, Trajectory(s1 + 0.01, times, moving + 0.014, vel)))
    spin(r, 0.2)
    assert r.node.gate.clamp.rejected == {}
    out = forwarded(r)
    assert len(out) == 2
    assert out[0].points[0].velocities[0] == pytest.approx(1.4)


def test_the_hold_service_brakes_to_a_hold_once_there_is_something_to_hold(rig):
    """How the task manager, another process, holds the robot on a canceled task."""
    r = rig
    hold = r.probe.create_client(Trigger, '/harness/hold')
    spin(r, 0.3)

    def call():
        fut = hold.call_async(Trigger.Request())
        end = time.monotonic() + 5
        while not fut.done() and time.monotonic() < end:
            spin_slice(r.ex, 0.02)
        return fut.result()

    reply = call()
    assert not reply.success and 'no joint state' in reply.message and r.out == []
    r.js.publish(JointState(name=NAMES, position=Q))
    spin(r, 0.2)
    assert call().success
    spin(r, 0.1)
    assert len(r.out) == 1 and len(r.out[0].points) == 1
    assert r.out[0].points[0].positions == pytest.approx(Q)


def test_the_gate_process_loads_no_planner_code():
    """The gate's node imports neither the planning package, torch nor an HTTP client:
    a crash or a GIL hold in them cannot happen in its process (issue 24, item 1)."""
    code = (
        'import sys, harness_node.node\n'
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'httpx', 'sentence_transformers') "
        "or m.startswith('wam_core.planning') or m == 'harness_node.task_manager')\n"
        'print(bad)\n'
        'sys.exit(1 if bad else 0)\n'
    )
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
