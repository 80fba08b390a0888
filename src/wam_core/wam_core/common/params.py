"""Parameter schemas: dataclasses whose fields carry their ROS parameter descriptors.

Every node has one schema (``common.config``): a dataclass tree whose leaf fields are
declared with ``param(default, description, ...)``. Nested dataclasses become dotted
parameter names (``repr_cache.ttl_ms``); a ``per_joint`` field is a mapping keyed by
the robot's joint names (``joint_limits.arm_joint_1.velocity``). One schema serves
every reader, so they cannot disagree:

- the rclpy glue (``wam_util.params``) declares each leaf with a ParameterDescriptor
  built from its spec, so ``ros2 param describe`` explains it;
- ``load_params`` reads one node's values from a ROS 2 parameter file without ROS
  (benchmarks, drills, tests), merging the ``/**`` block and the node's own as rcl does;
- ``from_flat`` checks each value's type (as strictly as ROS: 50 is not a float),
  range and choices, runs each section's ``validate()``, and names the parameter.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

PARAM, PER_JOINT = 'wam_param', 'wam_per_joint'


class ConfigError(ValueError):
    """A parameter is missing, of the wrong type or out of range; the message names it."""


class _Required:
    def __repr__(self) -> str:
        return 'REQUIRED'


REQUIRED: Any = _Required()  # a leaf with no default: the parameter file must set it


@dataclass(frozen=True)
class ParamSpec:
    """What ``ros2 param describe`` shows for one parameter."""

    description: str
    min: float | None = None  # inclusive, as ROS integer and floating-point ranges
    max: float | None = None
    choices: tuple[str, ...] = ()
    auto: bool = False  # a float that may also be the string 'auto' (derived at run time)


AUTO = 'auto'


def param(default: Any, description: str, *, min=None, max=None, choices=(), auto=False) -> Any:
    """A schema leaf: its default (``REQUIRED`` for none) and its descriptor. ``auto``:
    a float parameter that also takes the string ``'auto'`` (its reader derives the
    value, e.g. the cache TTL from the camera; ROS declares it dynamically typed)."""
    meta = {PARAM: ParamSpec(description, min, max, tuple(choices), auto)}
    if default is REQUIRED:
        return field(metadata=meta)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type) -> Any:
    """A nested block of parameters (its name is the prefix of theirs)."""
    return field(default_factory=cls)


def per_joint(cls: type, defaults: Mapping[str, Any], description: str) -> Any:
    """One ``cls`` block per joint of ``robot.joint_names``; ``defaults`` for known joints."""
    return field(default_factory=lambda: dict(defaults), metadata={PER_JOINT: (cls, description)})


@dataclass(frozen=True)
class Leaf:
    """One parameter of a schema."""

    name: str  # dotted, relative to the node
    default: Any  # REQUIRED when the parameter file must give it
    kind: type  # bool | int | float | str | list (of str)
    spec: ParamSpec


def _kind(default: Any, annotation: str) -> type:
    if default is not REQUIRED:
        return list if isinstance(default, (list, tuple)) else type(default)
    return {'float': float, 'int': int, 'str': str, 'bool': bool}[annotation]


def leaves(
    schema: type,
    joint_names: Sequence[str] | None = None,
    joint_defaults: Mapping[str, Any] | None = None,
) -> list[Leaf]:
    """Every parameter of ``schema``, in declaration order. Per-joint blocks expand over
    ``joint_names`` (default: the schema's default ``robot.joint_names``); their
    defaults are ``joint_defaults`` (the robot description's limits) where given, else
    the schema's."""
    defaults = schema()
    if joint_names is None:
        robot = getattr(defaults, 'robot', None)
        joint_names = list(robot.joint_names) if robot is not None else []
    return list(_leaves(schema, defaults, '', list(joint_names), joint_defaults or {}))


def _leaves(cls: type, default_obj: Any, prefix: str, joints: list[str], joint_defaults):
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        if default_obj is not None:
            value = getattr(default_obj, f.name)
        elif f.default is not dataclasses.MISSING:  # a joint with no default block
            value = f.default
        else:
            value = REQUIRED
        if PER_JOINT in f.metadata:
            item_cls, _ = f.metadata[PER_JOINT]
            for joint in joints:
                block = joint_defaults.get(joint, value.get(joint))
                yield from _leaves(item_cls, block, f'{name}.{joint}.', joints, joint_defaults)
        elif PARAM in f.metadata:
            spec = f.metadata[PARAM]
            kind = float if spec.auto else _kind(value, str(f.type))
            yield Leaf(name, value, kind, spec)
        elif dataclasses.is_dataclass(value):
            yield from _leaves(type(value), value, name + '.', joints, joint_defaults)


def check_value(leaf: Leaf, value: Any) -> Any:
    """``value`` for ``leaf`` or ConfigError naming the parameter (no silent coercion)."""
    spec, kind = leaf.spec, leaf.kind
    if value is None or value is REQUIRED:
        raise ConfigError(f'parameter {leaf.name} is not set ({spec.description})')
    if spec.auto and value == AUTO:
        return value
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, float),
        str: isinstance(value, str),
        list: isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value),
    }[kind]
    if not ok:
        want = {list: 'a list of strings', float: 'a float (write 50.0, not 50)'}.get(
            kind, f'a {kind.__name__}'
        )
        if spec.auto:
            want += " or 'auto'"

        raise ConfigError(f'parameter {leaf.name} must be {want}, got {value!r}')
    if kind in (int, float):
        if kind is float and not math.isfinite(value):
            raise ConfigError(f'parameter {leaf.name} must be finite, got {value!r}')
        if (spec.min is not None and value < spec.min) or (
            spec.max is not None and value > spec.max
        ):
            raise ConfigError(
                f'parameter {leaf.name} must be in [{spec.min}, {spec.max}], got {value!r}'
            )
    if spec.choices and value not in spec.choices:
        raise ConfigError(
            f'parameter {leaf.name} must be one of {", ".join(spec.choices)}, got {value!r}'
        )
    return list(value) if kind is list else value


def from_flat(schema: type, flat: Mapping[str, Any], joint_defaults=None):
    """Dotted parameter values (missing ones take their defaults; per-joint ones
    ``joint_defaults``' where given) -> a validated schema."""
    joints = flat.get('robot.joint_names')
    items = leaves(schema, None if joints is None else list(joints), joint_defaults)
    values = {leaf.name: check_value(leaf, flat.get(leaf.name, leaf.default)) for leaf in items}
    return _build(schema, values, '', values.get('robot.joint_names', []))


def _build(cls: type, values: Mapping[str, Any], prefix: str, joints: list[str]):
    kwargs = {}
    for f in dataclasses.fields(cls):
        name = prefix + f.name
        if PER_JOINT in f.metadata:
            item_cls, _ = f.metadata[PER_JOINT]
            kwargs[f.name] = {j: _build(item_cls, values, f'{name}.{j}.', joints) for j in joints}
        elif PARAM in f.metadata:
            kwargs[f.name] = values[name]
        else:
            kwargs[f.name] = _build(type(f.default_factory()), values, name + '.', joints)
    obj = cls(**kwargs)
    validate = getattr(obj, 'validate', None)
    if validate is not None:
        validate()
    return obj


def to_flat(obj: Any) -> dict[str, Any]:
    """A schema instance -> {dotted parameter name: value} (the inverse of ``from_flat``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if PER_JOINT in f.metadata:
            for joint, item in value.items():
                out.update({f'{f.name}.{joint}.{k}': v for k, v in to_flat(item).items()})
        elif PARAM in f.metadata:
            out[f.name] = value
        else:
            out.update({f'{f.name}.{k}': v for k, v in to_flat(value).items()})
    return out


def _flatten_yaml(block: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in block.items():
        name = f'{prefix}{key}'
        if isinstance(value, dict):
            out.update(_flatten_yaml(value, name + '.'))
        else:
            out[name] = value
    return out


WILDCARDS = ('/**', '/*')


def read_param_file(path: str) -> dict[str, dict[str, Any]]:
    """A ROS 2 parameter file -> {node block name: {dotted parameter name: value}}."""
    try:
        with open(path, encoding='utf-8') as fh:
            doc = yaml.safe_load(fh) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f'cannot read parameter file {path}: {exc}') from None
    out = {}
    for node, block in doc.items():
        if not (isinstance(block, dict) and isinstance(block.get('ros__parameters'), dict)):
            raise ConfigError(f'{path}: block {node!r} has no ros__parameters mapping')
        out[str(node)] = _flatten_yaml(block['ros__parameters'])
    return out


def node_values(blocks: Mapping[str, Mapping[str, Any]], node: str) -> dict[str, dict]:
    """The wildcard values and the node's own block (its own win, as in rcl). The own
    block is ``node``, ``/node`` or ``/**/node`` (the form that reaches the node in any
    namespace, so one file configures every robot of a fleet)."""
    shared: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for name, values in blocks.items():
        if name in WILDCARDS:
            shared.update(values)
        elif name.removeprefix('/**/').lstrip('/') == node:
            own.update(values)
    return {'shared': shared, 'own': own}


def load_params(path, node: str, schema: type):
    """One node's schema from a ROS 2 parameter file, or several in order (an overlay
    after config/wam.yaml: a later file's value wins, a node's own block wins over the
    wildcards, as rcl merges them), without ROS. A key in the node's own block that the
    schema lacks is an error (a typo would otherwise be ignored); shared keys that this
    node does not use are skipped."""
    paths = [path] if isinstance(path, str) else list(path)
    values = {'shared': {}, 'own': {}}
    for p in paths:
        found = node_values(read_param_file(p), node)
        values['shared'].update(found['shared'])
        values['own'].update(found['own'])
    path = ', '.join(paths)
    given = {**values['shared'], **values['own']}
    joints = given.get('robot.joint_names')
    joint_defaults = (
        description_limits(given['robot.description_file'])
        if 'robot.description_file' in given
        else None
    )
    known = {leaf.name for leaf in leaves(schema, joints, joint_defaults)}
    unknown = sorted(set(values['own']) - known)
    if unknown:
        raise ConfigError(f'{path}: {node} has no parameter(s) {", ".join(unknown)}')
    flat = {k: v for k, v in values['shared'].items() if k in known}
    flat.update(values['own'])
    return from_flat(schema, flat, joint_defaults)


def description_limits(description_file) -> dict | None:
    """The per-joint limits of the robot description a parameter file names (its URDF
    and the joint_limits.yaml beside it): the defaults of ``joint_limits``. None for the
    shipped arm ('', whose limits are the schema's defaults)."""
    if not isinstance(description_file, str) or not description_file:
        return None
    from .robot import description_of_file  # robot imports this module

    return dict(description_of_file(description_file).limits)
