"""The command the robot is following: the clamping gate's baseline for the next chunk.

A position-controlled arm lags its command; basing each 50 Hz chunk on the measured
position would restart it from rest every period and the arm would crawl. The gate
therefore starts each chunk from the last forwarded trajectory, evaluated the way the
controller follows it, unless the robot has stopped following it.
"""

from __future__ import annotations

import numpy as np


class CommandTracker:
    """The trajectory last forwarded to the robot, followed the way the controller does
    (linear between points, holding the last): the gate's baseline for the next chunk.

    ``baseline(t, measured)`` -> (position, velocity or None). It falls back to the
    measured position when nothing was sent, or when the command has drifted more than
    ``max_deviation`` from it (a stopped or blocked robot does not follow its command).
    """

    def __init__(self, max_deviation: float = 0.15):
        self.max_deviation = max_deviation
        self._times: np.ndarray | None = None
        self._pos: np.ndarray | None = None

    def record(self, start_s: float, times, positions) -> None:
        self._times = start_s + np.asarray(times, dtype=np.float64)
        self._pos = np.asarray(positions, dtype=np.float64).reshape(len(self._times), -1)

    def reset(self) -> None:
        self._times = self._pos = None

    def baseline(self, t: float, measured: np.ndarray):
        measured = np.asarray(measured, dtype=np.float64)
        if self._times is None or self._pos.shape[1] != measured.shape[0]:
            return measured, None
        times, pos = self._times, self._pos
        if t >= times[-1] or len(times) == 1:
            p, v = pos[-1], np.zeros_like(measured)
        elif t <= times[0]:
            p, v = pos[0], np.zeros_like(measured)
        else:
            k = int(np.searchsorted(times, t, side='right'))
            a = (t - times[k - 1]) / (times[k] - times[k - 1])
            p = pos[k - 1] + a * (pos[k] - pos[k - 1])
            v = (pos[k] - pos[k - 1]) / (times[k] - times[k - 1])
        if np.max(np.abs(p - measured)) > self.max_deviation:
            return measured, None
        return p, v
