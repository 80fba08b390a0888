"""The robot description: its joints, in command order, and their limits, in one place.

Limits are URDF-style per joint (lower/upper in rad, or m for a prismatic joint;
velocity; effort) plus an acceleration limit as in ros2_control's joint_limits.
``TABLETOP_ARM`` is the robot the stack ships for: the simulated tabletop arm (6
revolute joints and a prismatic gripper finger). The simulator builds its joints and
ranges from it, the parameter schemas take their defaults from it, and the harness's
clamping gate enforces the limits configured for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .params import REQUIRED, ConfigError, param


def robot_of_namespace(namespace: str) -> str:
    """The robot a node serves, from its ROS namespace: '/robot1' -> 'robot1', '/' -> ''
    (a lone robot in the root namespace, today's topic names)."""
    return namespace.strip().strip('/')


@dataclass(frozen=True)
class JointLimit:
    lower: float = param(
        REQUIRED, 'lowest position, rad (m for a prismatic joint)', min=-1000.0, max=1000.0
    )
    upper: float = param(
        REQUIRED, 'highest position, rad (m for a prismatic joint)', min=-1000.0, max=1000.0
    )
    velocity: float = param(REQUIRED, 'speed limit, rad/s (m/s)', min=1e-6, max=1000.0)
    effort: float = param(
        0.0,
        'effort limit, N m (N): recorded as in a URDF; position control does not use it',
        min=0.0,
        max=1e6,
    )
    acceleration: float = param(
        10.0,
        'acceleration limit, rad/s^2 (m/s^2), as in ros2_control joint_limits',
        min=1e-6,
        max=1e6,
    )

    def check(self, name: str) -> None:
        """ConfigError naming the joint unless lower < upper and the rates are positive."""
        vals = (self.lower, self.upper, self.velocity, self.acceleration)
        if (
            not all(math.isfinite(v) for v in vals)
            or self.lower >= self.upper
            or self.velocity <= 0
            or self.acceleration <= 0
        ):
            raise ConfigError(f'bad limits for joint {name!r}: {self}')


@dataclass(frozen=True)
class RobotDescription:
    """A robot as the stack sees it: joint names in command order and their limits."""

    joint_names: tuple[str, ...]
    limits: Mapping[str, JointLimit] = field(default_factory=dict)
    prismatic: frozenset[str] = frozenset()  # joints in metres; the others are revolute

    def change_tolerance(self, name: str) -> float:
        """The smallest change of a command worth reporting: 1e-3 rad, or 1e-4 m."""
        return 1e-4 if name in self.prismatic else 1e-3

    def __post_init__(self) -> None:
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ConfigError(f'joint names must be unique and non-empty: {self.joint_names}')
        for name in self.joint_names:
            if name not in self.limits:
                raise ConfigError(f'no limits for joint {name!r}')
            self.limits[name].check(name)


def limits_from_dict(
    joint_names: Sequence[str], data: Mapping[str, Mapping[str, float]]
) -> dict[str, JointLimit]:
    """{'joint': {'lower':..,'upper':..,'velocity':..,'effort':..,'acceleration':..}} -> limits."""
    out = {}
    for name in joint_names:
        if name not in data:
            raise ConfigError(f'no limits configured for joint {name!r}')
        spec = data[name]
        lim = JointLimit(
            float(spec['lower']),
            float(spec['upper']),
            float(spec['velocity']),
            float(spec.get('effort', 0.0)),
            float(spec.get('acceleration', 10.0)),
        )
        lim.check(name)
        out[name] = lim
    return out


_ARM = JointLimit(-2.9, 2.9, 1.5, 50.0, 8.0)
_FINGER = JointLimit(0.0, 0.04, 0.1, 20.0, 1.0)  # prismatic, metres
_ARM_JOINTS = (
    'arm_joint_1',
    'arm_joint_2',
    'arm_joint_3',
    'arm_joint_4',
    'arm_joint_5',
    'arm_joint_6',
)

TABLETOP_ARM = RobotDescription(
    joint_names=(*_ARM_JOINTS, 'gripper_joint'),
    limits={**dict.fromkeys(_ARM_JOINTS, _ARM), 'gripper_joint': _FINGER},
    prismatic=frozenset({'gripper_joint'}),
)
