"""Conversions between core values and ROS messages: stamps, trajectories, diagnostics.

The only place that knows how a stamp, a Duration, a JointTrajectory's points or a
DiagnosticStatus's level are laid out; nodes, drills and tests convert through here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from wam_core.control.conformance import TrajectoryPoint
from wam_interfaces.msg import LatencyStats, ReasonCount

# DiagnosticStatus.level is a byte; these wheels give it to Python as bytes.
_LEVEL_IS_BYTES = isinstance(DiagnosticStatus().level, bytes)


# ----------------------------------------------------------------------------- time
def stamp_to_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    t = Time()
    t.sec, t.nanosec = divmod(int(ns), 1_000_000_000)
    return t


def duration(seconds: float) -> Duration:
    d = Duration()
    d.sec, d.nanosec = divmod(int(round(seconds * 1e9)), 1_000_000_000)
    return d


def duration_to_s(d) -> float:
    return d.sec + d.nanosec * 1e-9


# ----------------------------------------------------------------------- trajectories
def joint_trajectory(
    joint_names: Sequence[str],
    positions: np.ndarray,
    start_ns: int,
    period_s: float,
    frame_id: str = '',
) -> JointTrajectory:
    """[H, N] positions -> JointTrajectory whose header.stamp is when point 0 applies."""
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(start_ns)
    msg.header.frame_id = frame_id
    msg.joint_names = list(joint_names)
    pts = []
    for i, row in enumerate(np.asarray(positions, dtype=np.float64)):
        p = JointTrajectoryPoint()
        p.positions = row.tolist()
        p.time_from_start = duration(i * period_s)
        pts.append(p)
    msg.points = pts
    return msg


def timed_trajectory(joint_names: Sequence[str], traj, frame_id: str = '') -> JointTrajectory:
    """A ``wam_core.control.trajectory.Trajectory`` (start in wall-clock seconds) ->
    JointTrajectory: header.stamp is when point 0 applies; positions and, when the
    trajectory has them, velocities per point."""
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(int(round(traj.start * 1e9)))
    msg.header.frame_id = frame_id
    msg.joint_names = list(joint_names)
    vel = traj.velocities
    pts = []
    for i, (t, row) in enumerate(zip(traj.times, traj.positions, strict=True)):
        p = JointTrajectoryPoint()
        p.positions = row.tolist()
        if vel is not None:
            p.velocities = vel[i].tolist()
        p.time_from_start = duration(float(t))
        pts.append(p)
    msg.points = pts
    return msg


def trajectory_velocities(msg: JointTrajectory):
    """[H, N] velocities, or None unless every point carries them (the controller then
    interpolates cubically)."""
    if not msg.points or any(len(p.velocities) != len(p.positions) for p in msg.points):
        return None
    return np.array([list(p.velocities) for p in msg.points], dtype=np.float64)


def conformance_points(msg: JointTrajectory) -> list:
    """The message's points as ``wam_core.control.conformance.TrajectoryPoint``s."""
    return [
        TrajectoryPoint(
            duration_to_s(p.time_from_start),
            list(p.positions),
            list(p.velocities),
            list(p.accelerations),
            list(p.effort),
        )
        for p in msg.points
    ]


def trajectory_times(msg: JointTrajectory) -> list[float]:
    """Each point's time_from_start, s."""
    return [duration_to_s(p.time_from_start) for p in msg.points]


def trajectory_positions(msg: JointTrajectory) -> list[list[float]]:
    """Each point's positions (ragged if the message is: callers validate the shape)."""
    return [list(p.positions) for p in msg.points]


# ------------------------------------------------------------------------ diagnostics
def status_level(status: DiagnosticStatus) -> int:
    return status.level[0] if isinstance(status.level, bytes) else int(status.level)


def diagnostic_status(
    name: str, hardware_id: str, level: int, message: str, values: Iterable[tuple[str, object]]
) -> DiagnosticStatus:
    st = DiagnosticStatus()
    st.level = bytes([level]) if _LEVEL_IS_BYTES else level
    st.name = name
    st.hardware_id = hardware_id
    st.message = message
    st.values = [KeyValue(key=str(k), value=format_value(v)) for k, v in values]
    return st


def format_value(v) -> str:
    """How every diagnostic value is written: floats with 3 decimals, the rest as str()."""
    if isinstance(v, float):
        return f'{v:.3f}'
    return str(v)


def diagnostic_array(stamp_ns: int, statuses) -> DiagnosticArray:
    arr = DiagnosticArray()
    arr.header.stamp = ns_to_stamp(stamp_ns)
    arr.status = list(statuses)
    return arr


# --------------------------------------------------------------- typed status parts
def latency_stats(stage: str, summary: Mapping[str, float]) -> LatencyStats:
    """A ``LatencyWindow.summary()`` as a LatencyStats message."""
    return LatencyStats(
        stage=stage,
        p50_ms=float(summary['p50']),
        p99_ms=float(summary['p99']),
        max_ms=float(summary['max']),
        samples=int(summary['n']),
    )


def reason_counts(counts: Mapping[str, int]) -> list[ReasonCount]:
    """{reason: count} -> ReasonCount messages, sorted by reason."""
    return [ReasonCount(reason=str(k), count=int(v)) for k, v in sorted(counts.items())]


def counts_of(items: Iterable[ReasonCount]) -> dict[str, int]:
    """ReasonCount messages -> {reason: count} (the reader's side)."""
    return {rc.reason: int(rc.count) for rc in items}


def latency_of(items: Iterable[LatencyStats], stage: str) -> LatencyStats | None:
    """The stage's LatencyStats among a status's, or None."""
    return next((s for s in items if s.stage == stage), None)
