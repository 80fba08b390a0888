"""Trajectories as the controller follows them, chunk shaping, hold_last_action, the
controller's acceptance rules and the tick clock."""

import threading
import time

import numpy as np
import pytest

from wam_core.common.robot import TABLETOP_ARM
from wam_core.control.command_tracker import CommandTracker
from wam_core.control.conformance import ControllerRules, TrajectoryPoint, violations
from wam_core.control.limits import ClampGate, GateActivity, check_trajectory
from wam_core.control.trajectory import (
    Trajectory,
    braking_point,
    braking_tail,
    point_velocities,
)
from wam_core.serving.chunk_stream import HELD, OPEN_LOOP, ChunkStream, blend_weights
from wam_core.serving.deadline_timer import DeadlineTimer

NAMES = list(TABLETOP_ARM.joint_names)
LIMITS = TABLETOP_ARM.limits
DT = 0.02


# ------------------------------------------------------------------------ trajectories
def test_cubic_sampling_passes_through_the_points_with_their_velocities():
    t = np.array([0.0, 0.1, 0.3])
    p = np.array([[0.0], [0.1], [0.5]])
    v = np.array([[1.0], [2.0], [0.0]])
    traj = Trajectory(10.0, t, p, v)
    for k in range(3):
        pk, vk = traj.sample(10.0 + t[k] + (1e-12 if k == 0 else 0.0))
        assert np.allclose(pk, p[k], atol=1e-9) and np.allclose(vk, v[k], atol=1e-6)
    # between points the velocity is the spline's derivative: check by differencing
    e = 1e-6
    (pa, _), (pb, vm) = traj.sample(10.2 - e), traj.sample(10.2)
    assert np.allclose((pb - pa) / e, vm, atol=1e-3)
    assert np.allclose(traj.sample(11.0)[0], p[-1]) and np.allclose(traj.sample(11.0)[1], 0)


def test_sampling_many_times_at_once_is_sampling_each():
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.uniform(0.01, 0.05, 8)) - 0.01
    p, v = rng.normal(size=(8, 3)), rng.normal(size=(8, 3))
    origin = (9.9, rng.normal(size=3), rng.normal(size=3))
    for traj in (
        Trajectory(10.0, t, p, v),
        Trajectory(10.0, t, p),  # positions only
        Trajectory(10.0, t[-1:] + 0.2, p[:1], v[:1], origin=origin),  # a braking hold
    ):
        ts = 10.0 + np.linspace(-0.2, t[-1] + 0.3, 57)
        ts[5] = 10.0 + traj.times[0]  # exactly on a point
        want = np.array([traj.sample(x)[0] for x in ts])
        assert np.array_equal(traj.sample_positions(ts), want)


def test_positions_only_interpolate_linearly():
    traj = Trajectory(0.0, np.array([0.0, 1.0]), np.array([[0.0], [2.0]]))
    p, v = traj.sample(0.25)
    assert np.allclose(p, 0.5) and np.allclose(v, 2.0)


def test_a_braking_hold_decelerates_within_the_limit_and_ends_at_rest():
    p0, v0 = np.array([0.0, 0.0]), np.array([1.5, -0.5])
    a = np.array([8.0, 8.0])
    point, duration = braking_point(p0, v0, a, 0.02)
    assert duration == pytest.approx(1.5 / 8.0)
    traj = Trajectory(0.0, np.array([duration]), point[None], np.zeros((1, 2)), (0.0, p0, v0))
    ts = np.linspace(0, duration, 200)
    vel = np.array([traj.sample(t)[1] for t in ts])
    acc = np.abs(np.diff(vel, axis=0) / np.diff(ts)[:, None])
    assert np.all(acc <= a + 1e-6)  # constant deceleration: the cubic is that parabola
    assert np.allclose(traj.sample(duration)[0], point) and np.allclose(vel[-1], 0, atol=1e-9)


def test_braking_tail_comes_to_rest_within_the_acceleration_limit():
    tail = braking_tail(np.zeros(2), np.array([1.0, -0.3]), np.array([8.0, 8.0]), DT)
    seg = np.diff(np.vstack([np.zeros(2), tail]), axis=0) / DT
    assert np.all(np.abs(np.diff(seg, axis=0)) <= 8.0 * DT + 1e-9)
    assert np.allclose(tail[-1], tail[-2])


def test_point_velocities_continue_the_running_command_and_end_at_rest():
    t = DT * np.arange(5)
    p = np.outer(np.arange(5), [0.01, -0.02])
    v = point_velocities(t, p, first=np.array([0.3, -0.9]))
    assert np.allclose(v[0], [0.3, -0.9]) and np.allclose(v[-1], 0)
    assert np.allclose(v[2], [0.5, -1.0])


def test_tracker_samples_the_forwarded_command_and_falls_back_to_measured():
    tr = CommandTracker(max_deviation=0.1)
    here = np.zeros(2)
    assert tr.baseline(0.0, here)[1] is None  # nothing sent yet
    tr.record(1.0, [0.0, 0.1], [[0.0, 0.0], [0.05, 0.0]], [[0.5, 0], [0.5, 0]])
    p, v = tr.baseline(1.05, here)
    assert np.allclose(p, [0.025, 0]) and np.allclose(v, [0.5, 0])
    p, v = tr.baseline(1.05, np.array([0.5, 0.0]))  # the robot is elsewhere
    assert v is None and np.allclose(p, [0.5, 0])


def test_tracker_follows_the_running_command_until_the_next_ones_stamp():
    tr = CommandTracker()
    tr.record(0.0, [0.0, 1.0], [[0.0], [1.0]], [[1.0], [1.0]])
    tr.record(0.5, [0.0, 1.0], [[5.0], [5.0]], [[0.0], [0.0]])  # stamped ahead, sent at 0.4
    p, v = tr.baseline(0.45, np.array([0.45]))
    assert np.allclose(p, 0.45) and np.allclose(v, 1.0)  # still the first command
    assert np.allclose(tr.baseline(0.6, np.array([5.0]))[0], 5.0)


# ------------------------------------------------------------------------ chunk stream
def _ramp(q0, speed, n=16):
    """A model chunk moving every joint at ``speed`` (rad/s), row k at k periods."""
    return q0 + np.outer(DT * np.arange(n), speed)


def test_chunks_join_without_a_position_or_velocity_jump_and_end_at_rest():
    stream = ChunkStream(NAMES, LIMITS, DT, blend_points=3)
    q = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.02])
    speed = np.array([0.5, -0.3, 0.2, 0.0, 0.1, -0.1, 0.0])
    first = stream.chunk(_ramp(q, speed), 100.0, 1, q)
    assert first.start == pytest.approx(100.0 + DT)  # stamped for when it applies
    assert np.allclose(first.velocities[-1], 0) and len(first.times) >= 15
    # the next tick asks for something else (a faster ramp from the measured state)
    q1 = first.sample(100.0 + DT)[0]
    running_p, running_v = first.sample(100.0 + 2 * DT)
    second = stream.chunk(_ramp(q1, 2 * speed), 100.0 + DT, 1, q1)
    assert np.allclose(second.positions[0], running_p, atol=1e-9)  # no position jump
    assert np.allclose(second.velocities[0], running_v, atol=1e-9)  # no velocity jump
    # and it does go where the model asks, after the blend window
    asked = _ramp(q1, 2 * speed)[1:]
    assert np.allclose(second.positions[5:15, :6], asked[5:15, :6], atol=0.02)


def test_shaped_chunks_leave_nothing_for_the_gate_to_change():
    stream = ChunkStream(NAMES, LIMITS, DT)
    gate = ClampGate(NAMES, LIMITS, DT)
    tracker = CommandTracker()
    rng = np.random.default_rng(0)
    q = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.02])
    activity = GateActivity(NAMES, [TABLETOP_ARM.change_tolerance(j) for j in NAMES])
    for k in range(50):
        tick = 5.0 + k * DT
        raw = q + np.cumsum(rng.normal(0, 0.03, (16, 7)), axis=0)  # a jerky, too fast policy
        raw[:, 6] = np.clip(raw[:, 6], 0.0, 0.04)
        traj = stream.chunk(raw, tick, 1, q)
        base, vel = tracker.baseline(traj.start, q)
        res = gate.apply(NAMES, traj.positions, traj.times, base, vel)
        tracker.record(traj.start, traj.times, res.positions, traj.velocities)
        activity.add(res.change)
        assert check_trajectory(res.positions, traj.times, base, gate, current_velocity=vel) == []
        q = traj.sample(tick + DT)[0]
    assert activity.overall_share() == 0.0, activity.summary()


def test_hold_last_action_runs_open_loop_within_the_budget_then_brakes():
    stream = ChunkStream(NAMES, LIMITS, DT, max_open_loop_s=0.1)
    q = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.02])
    chunk = stream.chunk(_ramp(q, np.full(7, 0.4) * [1, 1, 1, 1, 1, 1, 0]), 0.0, 1, q)
    published = [stream.degraded(k * DT, 1, q) for k in range(1, 5)]
    assert published == [None] * 4 and stream.outcomes == {OPEN_LOOP: 4, HELD: 0}
    hold = stream.degraded(6 * DT, 1, q)  # 0.12 s after the last valid chunk applied
    assert hold is not None and stream.outcomes[HELD] == 1
    assert len(hold.times) == 1 and np.allclose(hold.velocities, 0)
    # it brakes from the command the robot follows, not from the measured position
    p_cmd, v_cmd = chunk.sample(hold.start)
    point, duration = braking_point(p_cmd, v_cmd, stream.bound.amax, DT)
    assert np.allclose(hold.positions[0], point) and hold.times[0] == pytest.approx(duration)
    assert not np.allclose(hold.positions[0], q)
    # republished while still degraded: the same stop point and end time
    again = stream.degraded(7 * DT, 1, q)
    assert np.allclose(again.positions, hold.positions)
    assert again.end == pytest.approx(hold.end)


def test_a_clamped_chunk_still_ends_at_rest_within_the_limits():
    stream = ChunkStream(NAMES, LIMITS, DT)
    q = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.02])
    traj = stream.chunk(_ramp(q, np.full(7, 5.0)), 0.0, 1, q)  # far above the velocity limit
    seg = np.diff(traj.positions, axis=0) / DT
    assert np.all(np.abs(seg) <= stream.bound.vmax + 1e-9)
    assert np.all(np.abs(np.diff(seg, axis=0)) <= stream.bound.amax * DT + 1e-9)
    assert np.allclose(seg[-1], 0.0) and np.allclose(traj.velocities[-1], 0.0)
    with pytest.raises(ValueError):
        stream.chunk(np.zeros((2, 7)), 0.0, 1, q)


def test_blend_weights():
    assert np.allclose(blend_weights(5, 0), 1)
    w = blend_weights(6, 3)
    assert w[0] == 0 and w[3] == 1 and np.all(np.diff(w) >= 0)


# ------------------------------------------------------------------------ conformance
RULES = ControllerRules(NAMES)


def _points(n=3, vel=True, end_v=0.0):
    pts = []
    for i in range(n):
        v = [0.1] * 7 if vel else []
        if vel and i == n - 1:
            v = [end_v] * 7
        pts.append(TrajectoryPoint(i * DT, [0.0] * 7, v))
    return pts


def test_a_well_formed_trajectory_conforms():
    now = time.time_ns()
    assert violations(RULES, NAMES, _points(), now + 10_000_000, now) == []
    assert violations(RULES, NAMES, _points(vel=False), 0, now) == []


@pytest.mark.parametrize(
    'names,points,stamp_offset_ms,rule',
    [
        (NAMES[:6], _points(), 10, 'joint_names'),
        (NAMES + [NAMES[0]], _points(), 10, 'joint_names'),
        (NAMES[:6] + ['bogus'], _points(), 10, 'joint_names'),
        (NAMES, [], 10, 'points'),
        (NAMES, _points(end_v=0.2), 10, 'end_velocity'),
        (NAMES, [TrajectoryPoint(0.0, [0.0] * 6)], 10, 'sizes'),
        (NAMES, [TrajectoryPoint(0.0, [0.0] * 7, [0.0] * 3)], 10, 'sizes'),
        (NAMES, [TrajectoryPoint(0.0, [0.0] * 7, effort=[1.0] * 7)], 10, 'sizes'),
        (NAMES, [TrajectoryPoint(0.0, [float('nan')] * 7)], 10, 'finite'),
        (NAMES, [TrajectoryPoint(0.1, [0.0] * 7), TrajectoryPoint(0.1, [0.0] * 7)], 10, 'time'),
        (NAMES, [TrajectoryPoint(-0.1, [0.0] * 7)], 10, 'time_from_start'),
        (NAMES, _points(), -500, 'ends_in_past'),
    ],
)
def test_each_acceptance_rule_is_enforced(names, points, stamp_offset_ms, rule):
    now = time.time_ns()
    bad = violations(RULES, names, points, now + stamp_offset_ms * 1_000_000, now)
    assert any(b.startswith(rule) for b in bad), bad


def test_partial_goals_and_moving_ends_when_the_controller_allows_them():
    rules = ControllerRules(NAMES, True, True)
    now = time.time_ns()
    pts = [TrajectoryPoint(0.0, [0.0] * 6, [0.3] * 6)]
    assert violations(rules, NAMES[:6], pts, 0, now) == []


# ------------------------------------------------------------------------ tick clock
def test_deadline_timer_fires_on_the_grid_and_skips_after_an_overrun():
    fired = []
    done = threading.Event()

    def tick(deadline):
        fired.append((deadline, time.monotonic()))
        if len(fired) == 3:
            time.sleep(0.05)  # overrun 2.5 periods
        if len(fired) >= 8:
            done.set()

    clock = DeadlineTimer(0.02, tick, 'test_tick')
    clock.start()
    assert done.wait(2.0)
    clock.stop()
    deadlines = np.array([d for d, _ in fired])
    steps = np.round(np.diff(deadlines) / 0.02).astype(int)
    assert np.allclose(np.diff(deadlines), steps * 0.02, atol=1e-9)  # always on the grid
    assert steps[2] >= 2 and clock.skipped >= 1  # the overrun skipped whole periods
    assert all(t >= d - 1e-4 for d, t in fired)  # never before its deadline


def test_deadline_timer_survives_a_failing_tick_and_reports_it():
    calls = []

    def tick(deadline):
        calls.append(deadline)
        raise RuntimeError('boom')

    clock = DeadlineTimer(0.01, tick)
    clock.start()
    time.sleep(0.1)
    clock.stop()
    assert len(calls) >= 3 and clock.errors == len(calls) and 'boom' in clock.last_error


def test_deadline_timer_rejects_a_bad_period():
    with pytest.raises(ValueError):
        DeadlineTimer(0.0, lambda d: None)
