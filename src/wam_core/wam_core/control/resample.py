"""A chunk trained at one control period, served at another.

Row k of a chunk is the target k model periods after the observation. A policy trained
at 15 or 30 Hz (many LeRobot datasets) served on a 50 Hz loop needs its rows one control
period apart: linear interpolation in time keeps row 0 at the observation and covers the
same span (the last row falls on or before the chunk's last model row; nothing is
extrapolated).
"""

from __future__ import annotations

import math

import numpy as np


def resample_chunk(rows: np.ndarray, src_period_s: float, dst_period_s: float) -> np.ndarray:
    """[H, N] rows ``src_period_s`` apart -> [H', N] rows ``dst_period_s`` apart."""
    rows = np.asarray(rows)
    if rows.ndim != 2 or len(rows) < 2:
        raise ValueError(f'a chunk to resample needs at least 2 rows, got shape {rows.shape}')
    if not (src_period_s > 0 and dst_period_s > 0):
        raise ValueError(f'periods must be positive: {src_period_s}, {dst_period_s}')
    span = (len(rows) - 1) * src_period_s
    count = math.floor(span / dst_period_s + 1e-9) + 1
    t = np.arange(count) * (dst_period_s / src_period_s)  # in model rows
    lo = np.minimum(np.floor(t).astype(int), len(rows) - 2)
    w = (t - lo)[:, None]
    return ((1.0 - w) * rows[lo] + w * rows[lo + 1]).astype(rows.dtype, copy=False)


def resampled_horizon(horizon: int, src_period_s: float, dst_period_s: float) -> int:
    """Rows of a ``horizon``-row chunk once resampled (what ``resample_chunk`` returns)."""
    return math.floor((horizon - 1) * src_period_s / dst_period_s + 1e-9) + 1
