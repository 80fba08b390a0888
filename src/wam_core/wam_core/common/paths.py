"""Where the workspace is: relative paths in the configuration resolve against $WAM_ROOT.

``scripts/env.sh`` (every make target) and the launch file set ``WAM_ROOT`` to the
repository root. Nothing guesses it from the current directory: a node started from
another directory would silently load other models.
"""

from __future__ import annotations

import os

from .params import ConfigError


def workspace_root() -> str:
    """$WAM_ROOT, or ConfigError saying how to set it."""
    root = os.environ.get('WAM_ROOT')
    if not root:
        raise ConfigError(
            'WAM_ROOT is not set: source scripts/env.sh (every make target does) '
            'or set it to the Mooncake-SG checkout'
        )
    return root


def resolve_path(path: str) -> str:
    """An absolute path as it is; a relative one against the workspace root."""
    if os.path.isabs(path):
        return path
    return os.path.normpath(os.path.join(workspace_root(), path))


def default_config() -> str:
    """The stack's parameter file: $WAM_CONFIG, else config/wam.yaml in the workspace."""
    return os.environ.get('WAM_CONFIG') or os.path.join(workspace_root(), 'config', 'wam.yaml')
