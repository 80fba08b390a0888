"""Validation of joint states against the configured robot."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class JointStateError(ValueError):
    """A joint state that cannot be used: ``reason`` is a short code (length, duplicate,
    missing, non_finite), the message says why in words."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class JointStateMapper:
    """Map a JointState (names, positions) onto the configured joint order.

    Rejects missing joints, length mismatches, duplicates and non-finite values;
    extra joints (e.g. a mobile base) are ignored. Reuses one output buffer.
    """

    def __init__(self, joint_names: Sequence[str]):
        self.joint_names = list(joint_names)
        self._order: dict[tuple, np.ndarray] = {}
        self._out = np.zeros(len(self.joint_names), dtype=np.float32)

    def map(self, names: Sequence[str], positions: Sequence[float]) -> np.ndarray:
        names = tuple(names)
        pos = np.asarray(positions, dtype=np.float64)
        if pos.ndim != 1 or len(names) != pos.size:
            raise JointStateError('length', f'{len(names)} names but {pos.size} positions')
        idx = self._order.get(names)
        if idx is None:
            if len(set(names)) != len(names):
                raise JointStateError('duplicate', 'duplicate joint names')
            where = {n: i for i, n in enumerate(names)}
            missing = [n for n in self.joint_names if n not in where]
            if missing:
                raise JointStateError(
                    'missing', f'missing joints {missing} (got {list(names)[:10]})'
                )
            idx = np.array([where[n] for n in self.joint_names], dtype=np.intp)
            if len(self._order) < 16:
                self._order[names] = idx
        sel = pos[idx]
        if not np.all(np.isfinite(sel)):
            raise JointStateError('non_finite', 'non-finite joint position (NaN/inf)')
        self._out[:] = sel
        return self._out.copy()
