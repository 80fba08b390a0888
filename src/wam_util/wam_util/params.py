"""Dataclass configs as ROS parameters: one declared parameter per leaf field."""

from __future__ import annotations

from wam_core.config import StackConfig, flatten, stack_config_from_flat


def declare_stack_config(node) -> None:
    for key, value in flatten(StackConfig()).items():
        node.declare_parameter(key, value)


def read_stack_config(node) -> StackConfig:
    """Raises wam_core.config.ConfigError with the offending parameter named."""
    names = flatten(StackConfig()).keys()
    return stack_config_from_flat({k: node.get_parameter(k).value for k in names})
