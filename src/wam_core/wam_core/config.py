"""Typed configuration mirroring config/*.yaml.

The YAML files are ROS 2 parameter files (``/**: ros__parameters: ...``). Nested
blocks become dotted parameter names (``repr_cache.ttl_ms``), so a node declares
exactly the flattened fields of these dataclasses and rebuilds them from its
parameters; ROS-free code and tests load the same file with ``load_stack_config``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

import yaml

DEFAULT_JOINT_NAMES = [
    'arm_joint_1',
    'arm_joint_2',
    'arm_joint_3',
    'arm_joint_4',
    'arm_joint_5',
    'arm_joint_6',
    'gripper_joint',
]


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


@dataclass
class WorldExpertConfig:
    model_dir: str = 'models/world_expert'


@dataclass
class ActionExpertConfig:
    model_dir: str = 'models/action_expert'


@dataclass
class ExpertsConfig:
    world: WorldExpertConfig = field(default_factory=WorldExpertConfig)
    action: ActionExpertConfig = field(default_factory=ActionExpertConfig)


@dataclass
class ReprCacheConfig:
    backend: str = 'inprocess'  # 'inprocess' | 'shm' (| 'cuda_ipc' on GPU)
    capacity: int = 512  # slots in the ring
    ttl_ms: float = 50.0  # max observation age a reader accepts
    shm_name: str = 'wam_repr'  # POSIX shm segment name (without leading '/')

    def validate(self) -> None:
        if self.backend not in ('inprocess', 'shm', 'cuda_ipc'):
            raise ConfigError(
                f"repr_cache.backend must be 'inprocess', 'shm' or 'cuda_ipc', got {self.backend!r}"
            )
        if not 1 <= self.capacity <= 65536:
            raise ConfigError(f'repr_cache.capacity must be in [1, 65536], got {self.capacity}')
        if not self.ttl_ms > 0:
            raise ConfigError(f'repr_cache.ttl_ms must be > 0, got {self.ttl_ms}')
        if not self.shm_name or '/' in self.shm_name:
            raise ConfigError(f'repr_cache.shm_name must be a plain name, got {self.shm_name!r}')


@dataclass
class RuntimeConfig:
    precision: str = (
        'auto'  # world expert dtype: 'auto' (bf16 where the CPU has it) | 'bf16' | 'fp32'
    )
    action_precision: str = 'fp32'  # action expert compute dtype (small matrices: fp32 is as fast)
    warmup_requests: int = 50
    timeout_world_ms: float = 40.0
    timeout_action_ms: float = 15.0
    degrade_on_timeout: str = 'hold_last_action'
    num_threads: int = 1  # torch intra-op threads per process (fixed: p99 over p50)

    def validate(self) -> None:
        for name in ('precision', 'action_precision'):
            if getattr(self, name) not in ('auto', 'bf16', 'fp32', 'fp16'):
                raise ConfigError(
                    f"runtime.{name} must be 'auto', 'bf16', 'fp16' or 'fp32', "
                    f'got {getattr(self, name)!r}'
                )
        if self.warmup_requests < 0:
            raise ConfigError('runtime.warmup_requests must be >= 0')
        if self.degrade_on_timeout != 'hold_last_action':
            raise ConfigError("runtime.degrade_on_timeout supports only 'hold_last_action'")
        if self.num_threads < 1:
            raise ConfigError('runtime.num_threads must be >= 1')


@dataclass
class ControlConfig:
    period_s: float = 0.02
    joint_names: list[str] = field(default_factory=lambda: list(DEFAULT_JOINT_NAMES))

    def validate(self) -> None:
        if not 0.001 <= self.period_s <= 1.0:
            raise ConfigError(f'control.period_s must be in [0.001, 1.0] s, got {self.period_s}')
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ConfigError('control.joint_names must be a non-empty list of unique names')


@dataclass
class StackConfig:
    experts: ExpertsConfig = field(default_factory=ExpertsConfig)
    repr_cache: ReprCacheConfig = field(default_factory=ReprCacheConfig)
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    control: ControlConfig = field(default_factory=ControlConfig)

    def validate(self) -> StackConfig:
        self.repr_cache.validate()
        self.runtime.validate()
        self.control.validate()
        return self


def flatten(obj: Any, prefix: str = '') -> dict[str, Any]:
    """Dataclass -> {'repr_cache.ttl_ms': 50.0, ...} (the ROS parameter names)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        name = f'{prefix}{f.name}'
        if dataclasses.is_dataclass(value):
            out.update(flatten(value, name + '.'))
        else:
            out[name] = value
    return out


def _build(cls, data: dict[str, Any], path: str):
    if not isinstance(data, dict):
        raise ConfigError(f'{path or "config"} must be a mapping, got {type(data).__name__}')
    kwargs = {}
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in data.items():
        if key not in known:
            raise ConfigError(f'unknown config key {path}{key!r}; known: {sorted(known)}')
        f = known[key]
        default = (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        )
        if dataclasses.is_dataclass(default):
            kwargs[key] = _build(type(default), value, f'{path}{key}.')
        else:
            kwargs[key] = _coerce(value, default, f'{path}{key}')
    return cls(**kwargs)


def _coerce(value: Any, default: Any, name: str) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f'{name} must be true/false, got {value!r}')
        return value
    if (
        isinstance(default, float)
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    ):
        return float(value)
    if isinstance(default, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f'{name} must be a list, got {value!r}')
        return list(value)
    if not isinstance(value, type(default)) or isinstance(value, bool) != isinstance(
        default, bool
    ):
        raise ConfigError(f'{name} must be {type(default).__name__}, got {value!r}')
    return value


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        node = nested
        parts = key.split('.')
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return nested


def stack_config_from_dict(data: dict[str, Any]) -> StackConfig:
    return _build(StackConfig, data, '').validate()


def stack_config_from_flat(flat: dict[str, Any]) -> StackConfig:
    return stack_config_from_dict(unflatten(flat))


def load_stack_config(path: str) -> StackConfig:
    """Load a ROS 2 parameter YAML (``/**: ros__parameters:``) into a StackConfig."""
    with open(path, encoding='utf-8') as fh:
        doc = yaml.safe_load(fh) or {}
    params: dict[str, Any] = {}
    for node_block in doc.values():
        if isinstance(node_block, dict) and isinstance(node_block.get('ros__parameters'), dict):
            params.update(node_block['ros__parameters'])
    # Keep only this dataclass' blocks: node-specific parameters may share the file.
    known = {f.name for f in dataclasses.fields(StackConfig)}
    return stack_config_from_dict({k: v for k, v in params.items() if k in known})


def resolve_path(path: str, root: str | None = None) -> str:
    """Resolve a model path: absolute as is, else against $WAM_ROOT or ``root`` or cwd."""
    if os.path.isabs(path):
        return path
    base = root or os.environ.get('WAM_ROOT') or os.getcwd()
    return os.path.normpath(os.path.join(base, path))
