"""A node's parameters from its schema: declared with descriptors, validated on read.

``NodeParams(node, Schema)`` declares every leaf of the schema (``wam_core.common``)
with a ParameterDescriptor (description, type, range, allowed values), so
``ros2 param describe`` explains each one. A value of the wrong type or out of range
in a parameter file does not crash the constructor: the error is kept, and ``read()``
raises ConfigError naming the parameter, which a lifecycle node turns into a failed
*configure* with that message. So does a parameter given to the node that no node of
the stack declares (a typo in config/wam.yaml or on the command line), as
``load_params`` refuses it without ROS: rclpy would otherwise ignore it silently. A name
another node declares is taken as meant for that node (a ``/**`` block reaches every
node); so are per-joint limits of joints this robot does not have.
"""

from __future__ import annotations

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import (
    InvalidParameterTypeException,
    InvalidParameterValueException,
    ParameterUninitializedException,
)
from rclpy.parameter import Parameter

from wam_core.common.config import NODE_SCHEMAS
from wam_core.common.params import (
    REQUIRED,
    ConfigError,
    Leaf,
    check_value,
    description_limits,
    from_flat,
    leaves,
)

_TYPES = {
    bool: Parameter.Type.BOOL,
    int: Parameter.Type.INTEGER,
    float: Parameter.Type.DOUBLE,
    str: Parameter.Type.STRING,
    list: Parameter.Type.STRING_ARRAY,
}
JOINT_NAMES = 'robot.joint_names'
DESCRIPTION = 'robot.description_file'
# declared by rclpy itself on every node (and by diagnostic_updater on a full install);
# qos_overrides.* is rclpy's QoS-override mechanism
BUILT_IN = ('use_sim_time', 'start_type_description_service', 'diagnostic_updater.period')
BUILT_IN_PREFIXES = ('qos_overrides.',)


def stack_parameter_names(joints: list[str] | None) -> set[str]:
    """Every parameter some node of the stack declares (for these joint names)."""
    return {leaf.name for schema in NODE_SCHEMAS.values() for leaf in leaves(schema, joints)}


def descriptor(leaf: Leaf) -> ParameterDescriptor:
    """The ParameterDescriptor ``ros2 param describe`` shows for a schema leaf."""
    spec = leaf.spec
    if spec.auto:  # a float or the string 'auto': ROS checks neither type nor range
        return ParameterDescriptor(
            description=spec.description,
            additional_constraints=f"a float in [{spec.min}, {spec.max}], or 'auto'",
            dynamic_typing=True,
        )
    d = ParameterDescriptor(description=spec.description, type=_TYPES[leaf.kind].value)
    if spec.choices:
        d.additional_constraints = 'one of: ' + ', '.join(spec.choices)
    if spec.min is not None and spec.max is not None:
        if leaf.kind is float:
            d.floating_point_range = [
                FloatingPointRange(from_value=float(spec.min), to_value=float(spec.max), step=0.0)
            ]
        elif leaf.kind is int:
            d.integer_range = [
                IntegerRange(from_value=int(spec.min), to_value=int(spec.max), step=0)
            ]
    return d


class NodeParams:
    """The schema's parameters, declared on ``node``; ``read()`` returns the schema."""

    def __init__(self, node, schema: type):
        self.node = node
        self.schema = schema
        self.errors: list[str] = []
        # Per-joint blocks are named after the joints, and their defaults are the robot
        # description's limits: declare the joint names and the description first.
        first = [leaf for leaf in leaves(schema) if leaf.name in (JOINT_NAMES, DESCRIPTION)]
        for leaf in first:
            self._declare(leaf)
        joints = None
        if node.has_parameter(JOINT_NAMES):
            joints = list(node.get_parameter(JOINT_NAMES).value)
        self.joint_defaults = None
        if node.has_parameter(DESCRIPTION):
            try:
                self.joint_defaults = description_limits(node.get_parameter(DESCRIPTION).value)
            except ConfigError as exc:  # read() reports it, as for a bad value
                self.errors.append(f'parameter {DESCRIPTION}: {exc}')
        self.leaves = leaves(schema, joints, self.joint_defaults)
        for leaf in self.leaves:
            if leaf.name not in (JOINT_NAMES, DESCRIPTION):
                self._declare(leaf)
        self._refuse_unknown(joints)

    def _refuse_unknown(self, joints: list[str] | None) -> None:
        given = getattr(self.node, '_parameter_overrides', {})  # file + command line
        known = stack_parameter_names(joints)
        ours = set(joints or ())
        for name in sorted(given):
            if name in known or name in BUILT_IN or name.startswith(BUILT_IN_PREFIXES):
                continue
            parts = name.split('.')
            if parts[0] == 'joint_limits' and len(parts) == 3 and parts[1] not in ours:
                continue  # limits of a joint this robot does not have: another robot's
            self.errors.append(
                f'parameter {name}: no node of the stack has it (typo? '
                f'{self.node.get_name()} declares {len(self.leaves)} parameters: '
                '`ros2 param list`)'
            )

    def _declare(self, leaf: Leaf) -> None:
        value = _TYPES[leaf.kind] if leaf.default is REQUIRED else leaf.default
        if isinstance(value, list) and not value:
            # rclpy types an empty list as a byte array; declared by type it stays unset
            # until a parameter file or override gives it (read() then takes the default)
            value = _TYPES[leaf.kind]
        try:
            given = self.node.declare_parameter(leaf.name, value, descriptor(leaf)).value
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            self.errors.append(f'parameter {leaf.name}: {exc}')
            return
        if leaf.spec.auto:  # declared untyped: its type and range are checked here
            try:
                check_value(leaf, given)
            except ConfigError as exc:
                self.errors.append(str(exc))

    def read(self):
        """The validated schema, or ConfigError naming every bad parameter."""
        if self.errors:
            raise ConfigError('; '.join(self.errors))
        flat = {}
        for leaf in self.leaves:
            try:
                flat[leaf.name] = self.node.get_parameter(leaf.name).value
            except ParameterUninitializedException:
                # an empty-list default (see _declare), else from_flat says it is not set
                flat[leaf.name] = [] if leaf.default == [] else None
        return from_flat(self.schema, flat, self.joint_defaults)
