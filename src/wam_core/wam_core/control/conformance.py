"""Would ros2_control's joint_trajectory_controller accept this trajectory?

The controller's documented acceptance rules (its ``validate_trajectory_msg`` and the
parameters ``allow_partial_joints_goal`` and ``allow_nonzero_velocity_at_trajectory_end``),
written out so tests and recorders can hold every trajectory the stack sends to the
robot against them:

- joint names: non-empty, each once, only configured joints, and all of them unless
  partial goals are allowed;
- points: at least one; positions sized as the joint names; velocities and accelerations
  empty or sized as the joint names; efforts empty (the controller does not take them);
- time_from_start strictly increasing from point to point, never negative;
- every value finite (a NaN reaching a position interface is undefined behaviour);
- a non-zero header stamp whose last point lies in the past when it is received is
  rejected ("ends in the past");
- the last point's velocities are zero unless the configuration allows otherwise.

ROS-free: callers pass the message's fields (``wam_util.convert.trajectory_fields``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class TrajectoryPoint:
    time_from_start_s: float
    positions: Sequence[float]
    velocities: Sequence[float] = ()
    accelerations: Sequence[float] = ()
    effort: Sequence[float] = ()


@dataclass
class ControllerRules:
    joints: Sequence[str]  # the controller's configured joints
    allow_partial_joints_goal: bool = False
    allow_nonzero_velocity_at_trajectory_end: bool = False
    end_velocity_tol: float = 1e-9


@dataclass
class ConformanceCounter:
    """Violations seen over many trajectories, by rule (recorders keep one)."""

    checked: int = 0
    violations: dict[str, int] = field(default_factory=dict)

    def add(self, problems: list[str]) -> None:
        self.checked += 1
        for p in problems:
            rule = p.split(':', 1)[0]
            self.violations[rule] = self.violations.get(rule, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.violations.values())


def violations(
    rules: ControllerRules,
    joint_names: Sequence[str],
    points: Sequence[TrajectoryPoint],
    stamp_ns: int,
    received_ns: int,
) -> list[str]:
    """The rules this trajectory breaks, as 'rule: detail' strings; empty if accepted."""
    out: list[str] = []
    names = list(joint_names)
    configured = set(rules.joints)
    if not names:
        out.append('joint_names: empty')
    if len(set(names)) != len(names):
        out.append(f'joint_names: repeated in {names}')
    unknown = [n for n in names if n not in configured]
    if unknown:
        out.append(f'joint_names: not configured {unknown}')
    missing = [n for n in rules.joints if n not in names]
    if missing and not rules.allow_partial_joints_goal:
        out.append(f'joint_names: missing {missing} (partial goals not allowed)')
    if not points:
        out.append('points: empty')
        return out
    n = len(names)
    previous = -math.inf
    for i, p in enumerate(points):
        if len(p.positions) != n:
            out.append(f'sizes: point {i} has {len(p.positions)} positions for {n} joints')
        for what, vals in (('velocities', p.velocities), ('accelerations', p.accelerations)):
            if len(vals) not in (0, n):
                out.append(f'sizes: point {i} has {len(vals)} {what} for {n} joints')
        if len(p.effort):
            out.append(f'sizes: point {i} has efforts (not accepted)')
        values = [p.time_from_start_s, *p.positions, *p.velocities, *p.accelerations]
        if not all(math.isfinite(v) for v in values):
            out.append(f'finite: point {i} has a NaN or inf')
        t = p.time_from_start_s
        if t < 0 or (i > 0 and not t > previous):
            out.append(f'time_from_start: point {i} at {t:.6f} s after {previous:.6f} s')
        previous = t
    last = points[-1]
    if stamp_ns != 0 and math.isfinite(last.time_from_start_s):
        end_ns = stamp_ns + int(last.time_from_start_s * 1e9)
        if end_ns < received_ns:
            out.append(
                f'ends_in_past: last point {(received_ns - end_ns) / 1e6:.1f} ms before receipt'
            )
    if (
        not rules.allow_nonzero_velocity_at_trajectory_end
        and len(last.velocities)
        and any(abs(v) > rules.end_velocity_tol for v in last.velocities)
    ):
        out.append('end_velocity: last point velocities are not zero')
    return out
