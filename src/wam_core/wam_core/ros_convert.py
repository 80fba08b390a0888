"""Conversions between wam_core values and ROS message objects.

Message classes are plain Python data (no rclpy), so this stays ROS-free in the
sense that matters: nothing here needs a node, an executor or a context.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

# diagnostic_msgs/DiagnosticStatus levels
OK, WARN, ERROR, STALE = 0, 1, 2, 3


def stamp_to_ns(stamp) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int, msg_cls=None):
    from builtin_interfaces.msg import Time

    t = (msg_cls or Time)()
    t.sec, t.nanosec = divmod(int(ns), 1_000_000_000)
    return t


def duration(seconds: float):
    from builtin_interfaces.msg import Duration

    d = Duration()
    ns = int(round(seconds * 1e9))
    d.sec, d.nanosec = divmod(ns, 1_000_000_000)
    return d


def joint_trajectory(
    joint_names: Sequence[str],
    positions: np.ndarray,
    start_ns: int,
    period_s: float,
    frame_id: str = '',
):
    """[H, N] positions -> JointTrajectory whose header.stamp is when point 0 applies."""
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

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


def diagnostic_status(
    name: str, hardware_id: str, level: int, message: str, values: Iterable[tuple[str, object]]
):
    from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

    st = DiagnosticStatus()
    st.level = bytes([level]) if isinstance(DiagnosticStatus().level, bytes) else level
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


def latency_values(prefix: str, summary: dict[str, float]) -> list[tuple[str, object]]:
    return [
        (f'{prefix} p50 ms', summary['p50']),
        (f'{prefix} p99 ms', summary['p99']),
        (f'{prefix} max ms', summary['max']),
    ]


def diagnostic_array(stamp_ns: int, statuses):
    from diagnostic_msgs.msg import DiagnosticArray

    arr = DiagnosticArray()
    arr.header.stamp = ns_to_stamp(stamp_ns)
    arr.status = list(statuses)
    return arr
