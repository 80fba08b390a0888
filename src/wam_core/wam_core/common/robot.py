"""The robot description: its joints, in command order, their limits and its kinematic
chain, read from a URDF (with ``urdf_parser_py``, ROS's own parser) and a
ros2_control joint-limits YAML (acceleration limits, which a URDF lacks).

Limits are per joint (lower/upper in rad, or m for a prismatic joint; velocity;
effort; acceleration). ``TABLETOP_ARM`` is the robot the stack ships for, read from
``wam_core/common/description/tabletop_arm.urdf``: the simulated tabletop arm (6 revolute
joints and a prismatic gripper whose second finger mimics the first). The simulator
builds its joints, ranges and link offsets from it, the action expert's forward
kinematics its chain, the parameter schemas take their defaults from it, and the
harness's clamping gate enforces the limits configured for it; the stack publishes the
URDF on ``robot_description``. Another arm needs another URDF (and a model trained for
it), not a code change.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import yaml

from .params import REQUIRED, ConfigError, param

DESCRIPTION_DIR = os.path.join(os.path.dirname(__file__), 'description')  # package data
TABLETOP_URDF = os.path.join(DESCRIPTION_DIR, 'tabletop_arm.urdf')
TABLETOP_LIMITS = os.path.join(DESCRIPTION_DIR, 'joint_limits.yaml')


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
class ChainJoint:
    """One joint of the serial chain from the base: its origin in the parent link (m)
    and its axis, a unit vector along x, y or z (the chain's frames are not rotated)."""

    name: str
    offset: tuple[float, float, float]
    axis: str  # 'x' | 'y' | 'z' (negative axes: '-y', ...)


@dataclass(frozen=True)
class RobotDescription:
    """A robot as the stack sees it: joint names in command order, their limits and the
    arm's kinematic chain to the tool centre point."""

    joint_names: tuple[str, ...]
    limits: Mapping[str, JointLimit] = field(default_factory=dict)
    prismatic: frozenset[str] = frozenset()  # joints in metres; the others are revolute
    chain: tuple[ChainJoint, ...] = ()  # base -> last arm joint (revolute joints)
    tcp_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)  # last arm link -> TCP, m
    # joint -> (origin in the parent link, axis) for every joint, chain or not
    origins: Mapping[str, tuple[tuple[float, float, float], str]] = field(default_factory=dict)
    mimics: Mapping[str, str] = field(default_factory=dict)  # mimic joint -> the joint it follows
    urdf: str = ''  # the URDF text, as published on robot_description

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


def _axis_name(xyz, where: str) -> str:
    for i, name in enumerate('xyz'):
        unit = [0.0, 0.0, 0.0]
        for sign, prefix in ((1.0, ''), (-1.0, '-')):
            unit[i] = sign
            if all(abs(a - b) < 1e-9 for a, b in zip(xyz, unit, strict=True)):
                return prefix + name
    raise ConfigError(f'{where}: axis {list(xyz)} is not along x, y or z')


def load_robot_description(urdf_path: str, limits_path: str | None = None) -> RobotDescription:
    """A robot from its URDF and (optionally) its ros2_control joint-limits YAML.

    The commanded joints are the URDF's revolute and prismatic joints that mimic no
    other, in the file's order; the chain is the serial path of revolute joints from the
    root link, and the TCP is the fixed joint's child named ``tcp``. ConfigError with the
    reason for anything the stack cannot serve (a joint without limits, a rotated frame,
    an axis off x/y/z, a continuous joint: the clamping gate and its braking rule keep
    every command inside position limits, and serving an unbounded, wrapping joint needs
    wrap-aware blending and tracking that are not written; a continuous joint that mimics
    another, or is not commanded, is fine)."""
    from urdf_parser_py.urdf import URDF  # lxml-based: loaded only where a URDF is read

    try:
        with open(urdf_path, encoding='utf-8') as fh:
            text = fh.read()
        robot = URDF.from_xml_string(text.encode())  # bytes: lxml refuses a str with an
        # encoding declaration
    except Exception as exc:  # OSError, lxml's syntax errors, the parser's own assertions
        raise ConfigError(f'cannot read the URDF {urdf_path!r}: {exc}') from None
    accel: dict[str, float] = {}
    if limits_path:
        try:
            with open(limits_path, encoding='utf-8') as fh:
                doc = yaml.safe_load(fh) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f'cannot read the joint limits {limits_path!r}: {exc}') from None
        for name, spec in (doc.get('joint_limits') or {}).items():
            if spec.get('has_acceleration_limits'):
                accel[name] = float(spec['max_acceleration'])
    names, limits, prismatic, origins, mimics = [], {}, set(), {}, {}
    for j in robot.joints:
        where = f'{urdf_path}: joint {j.name!r}'
        origin = j.origin
        if origin is not None and any(abs(r) > 1e-12 for r in (origin.rpy or [0, 0, 0])):
            raise ConfigError(f'{where}: rotated origins (rpy) are not supported yet')
        xyz = tuple(float(v) for v in (origin.xyz if origin is not None else (0, 0, 0)))
        moving = j.type in ('revolute', 'prismatic', 'continuous')
        axis = (
            _axis_name(j.axis if j.axis is not None else (1.0, 0.0, 0.0), where) if moving else ''
        )
        origins[j.name] = (xyz, axis)
        if j.type not in ('revolute', 'prismatic', 'continuous'):
            continue
        if j.mimic is not None:
            mimics[j.name] = j.mimic.joint
            continue
        if j.type == 'continuous':
            raise ConfigError(
                f'{where}: a continuous joint is not served yet (commands are kept inside '
                'position limits): describe it as revolute with the range it may use'
            )
        if j.limit is None:
            raise ConfigError(f'{where}: no <limit>')
        names.append(j.name)
        if j.type == 'prismatic':
            prismatic.add(j.name)
        limits[j.name] = JointLimit(
            float(j.limit.lower),
            float(j.limit.upper),
            float(j.limit.velocity),
            float(j.limit.effort or 0.0),
            accel.get(j.name, 10.0),
        )
    # the arm: the serial path from the root link to the TCP; revolute joints make the
    # chain, fixed ones (a flange, tool0) add their offset to what follows them
    parent_of = {j.child: j for j in robot.joints}
    tcp = parent_of.get('tcp')
    if tcp is None or tcp.type != 'fixed':
        raise ConfigError(f'{urdf_path}: no fixed joint to a link named "tcp"')
    path, link = [], 'tcp'
    while link in parent_of:
        path.append(parent_of[link])
        link = parent_of[link].parent
    chain, pending = [], (0.0, 0.0, 0.0)
    for j in reversed(path):
        offset = tuple(a + b for a, b in zip(pending, origins[j.name][0], strict=True))
        if j.type == 'fixed':
            pending = offset
        elif j.type == 'revolute':
            chain.append(ChainJoint(j.name, offset, origins[j.name][1]))
            pending = (0.0, 0.0, 0.0)
        else:
            raise ConfigError(f'{urdf_path}: the path to the TCP has a {j.type} joint {j.name!r}')
    tcp_offset = pending
    return RobotDescription(
        joint_names=tuple(names),
        limits=limits,
        prismatic=frozenset(prismatic),
        chain=tuple(chain),
        tcp_offset=tcp_offset,
        origins=origins,
        mimics=mimics,
        urdf=text,
    )


TABLETOP_ARM = load_robot_description(TABLETOP_URDF, TABLETOP_LIMITS)


def description_of_file(description_file: str) -> RobotDescription:
    """The robot a parameter file's ``robot.description_file`` names: its URDF (a relative
    path resolves against $WAM_ROOT) with the joint_limits.yaml beside it; '' is the
    shipped arm."""
    if not description_file:
        return TABLETOP_ARM
    from .paths import resolve_path

    urdf = resolve_path(description_file)
    limits = os.path.join(os.path.dirname(urdf), 'joint_limits.yaml')
    return load_robot_description(urdf, limits if os.path.exists(limits) else None)
