"""How the fault drills judge a run.

The stale rule: a full chunk rests on a representation older than the TTL in force plus
one control period. The TTL in force is the one the world expert announced (auto: its
camera's measured period plus the world budget), as the action expert reads it, not the
configured camera rate's. And an instance takeover within its target leaves the gate
nothing to brake for."""

import os
import random
import time

import pytest
import rclpy

from wam_core.common.config import HarnessParams
from wam_core.control.limits import ClampGate
from wam_interfaces.msg import RepresentationDescriptor
from wam_system_tests.fault_recorder import FaultResult, Recorder
from wam_util import convert

MS = 1_000_000
PERIOD_S = 0.02


@pytest.fixture
def recorder():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    node = rclpy.create_node('stale_rule_probe')
    h = HarnessParams()
    limits = ClampGate(h.robot.joint_names, h.joint_limits, h.control.period_s)
    # configured: a 10 Hz camera, TTL 140 ms, bound 160 ms
    yield Recorder(None, 'v1', 0.160, limits, PERIOD_S, node=node, namespace='/robot1')
    node.destroy_node()
    rclpy.try_shutdown()


def _descriptor(stamp_ns: int, ttl_ms: float, version: str = 'v1') -> RepresentationDescriptor:
    d = RepresentationDescriptor(model_version=version, ttl_ms=ttl_ms)
    d.header.stamp = convert.ns_to_stamp(stamp_ns)
    return d


def _chunk_stamp(tick_ns: int) -> int:
    return tick_ns + int(PERIOD_S * 1e9)  # stamped one period ahead (lead 1)


def test_before_any_announcement_the_configured_bound_applies(recorder):
    t0 = 10_000 * MS
    recorder.fresh_obs_ns.append(t0)  # learned from the ring: no TTL announced
    assert not recorder.stale(_chunk_stamp(t0 + 159 * MS))
    assert recorder.stale(_chunk_stamp(t0 + 161 * MS))
    assert recorder.stale(_chunk_stamp(t0 - 1))  # nothing observed before its tick


def test_a_slower_camera_announces_a_longer_ttl_and_is_judged_by_it(recorder):
    t0 = 10_000 * MS
    recorder._on_descriptor(_descriptor(t0, 165.0))  # the camera measured at 125 ms
    assert recorder.max_age_at(t0 + 10 * MS) == 185 * MS
    assert not recorder.stale(_chunk_stamp(t0 + 170 * MS))  # within 165 + 20
    assert recorder.stale(_chunk_stamp(t0 + 186 * MS))
    # a faster camera later: its shorter TTL applies from its observation on
    recorder._on_descriptor(_descriptor(t0 + 300 * MS, 120.0))
    assert recorder.max_age_at(t0 + 310 * MS) == 140 * MS
    assert recorder.stale(_chunk_stamp(t0 + 300 * MS + 141 * MS))
    assert not recorder.stale(_chunk_stamp(t0 + 300 * MS + 139 * MS))


def test_an_invalid_announcement_is_not_taken(recorder):
    t0 = 10_000 * MS
    recorder._on_descriptor(_descriptor(t0, float('nan')))
    recorder._on_descriptor(_descriptor(t0 + MS, 1e9))
    assert recorder.max_age_at(t0 + 10 * MS) == 160 * MS


def test_a_representation_of_another_version_is_not_fresh(recorder):
    t0 = 10_000 * MS
    recorder._on_descriptor(_descriptor(t0, 165.0, version='other'))
    assert recorder.stale(_chunk_stamp(t0 + 10 * MS))


def _instance_kill(**kw) -> FaultResult:
    base = dict(fault='instance_kill', hold_ms=5.0, unsafe=0, stale=0, recovery_s=0.05)
    return FaultResult(**{**base, **kw})


def test_a_fast_takeover_needs_no_brake_a_slow_one_does():
    assert _instance_kill(takeover_ms=120.0).judge().ok  # the robot never had to brake
    assert not _instance_kill(takeover_ms=260.0, brake_ms=150.0).judge().ok  # too slow
    assert not _instance_kill().judge().ok  # no takeover measured, no brake: not shown


def test_a_disturbed_neighbour_fails_the_run():
    assert not _instance_kill(takeover_ms=120.0, disturbed=True).judge().ok


def test_a_safety_stop_during_takeover_or_handback_fails_the_run():
    # fast takeover, no stale or unsafe point, but a gate stopped its robot: not handled
    assert not _instance_kill(takeover_ms=120.0, safety_stops=1).judge().ok


def test_a_takeover_chunk_is_one_computed_after_the_kill(recorder):
    """A killed node's last chunks are stamped up to its lead past the kill: they are not
    the survivor's first chunk."""
    t_fault = 100.0
    recorder.leads.append((t_fault - 1.0, 3))  # the killed node stamped 3 periods ahead
    mark = len(recorder.raw)
    # (stamp - one period): the dead node's last chunk, ticked 10 ms before the kill and
    # stamped 3 periods ahead; then the survivor's first
    recorder.raw += [t_fault - 0.010 + 2 * PERIOD_S, t_fault + 0.090]
    assert recorder.first_computed_after(mark, t_fault) == pytest.approx(t_fault + 0.090)
    assert recorder.first_computed_after(len(recorder.raw), t_fault) is None


@pytest.mark.parametrize(
    'raw_hold_before_s, stop_at_s, by',
    [
        (None, None, 'gate'),  # nothing from the action expert: the gate's own hold
        (0.3, None, 'gate'),  # the action expert's hold came long before
        (0.01, None, 'action expert'),  # the gate published it 10 ms after the expert
        (-0.004, None, 'gate'),  # one published after the gate's hold is not its source
        (None, 0.15, 'stop'),  # a safety stop before the hold
    ],
)
def test_the_drill_says_who_braked_the_robot(recorder, raw_hold_before_s, stop_at_s, by):
    """A braking hold in a drill's figures names its sender (both go out stamped 0):
    without it, the holds 5-8 s after an instance_kill were read as the gate's handback
    gap (2026-12-07)."""
    t_fault = time.monotonic()
    stamp = int(recorder.wall_clock.to_wall(t_fault - 0.03) * 1e9)
    recorder.forwarded.append((t_fault - 0.05, 16, stamp))  # the last chunk before
    t_hold = t_fault + 0.2
    sent = time.time_ns()  # when the gate published the hold (wall clock, ns)
    if raw_hold_before_s is not None:
        recorder.raw_holds.append(sent - int(raw_hold_before_s * 1e9))
    recorder.forwarded.append((t_hold, 1, 0))
    recorder.forwarded_hold_sent[t_hold] = sent
    if stop_at_s is not None:
        recorder.stops.append((t_fault + stop_at_s, True))
    res = recorder.result('world_kill', t_fault, None, t_fault + 1.0)
    assert res.brake_by == by
    first = stop_at_s if stop_at_s is not None else 0.2
    assert res.brake_ms == pytest.approx(first * 1e3, abs=1e-3)
