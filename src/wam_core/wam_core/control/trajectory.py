"""Timed joint trajectories, followed the way ros2_control's joint_trajectory_controller does.

One trajectory is a start time plus points (time_from_start, positions, optional
velocities). Between points the controller interpolates linearly when only positions are
given and with a cubic (Hermite) spline when velocities are given; after the last point
it holds. Everything that reasons about "where is the robot commanded to be at time t"
(the clamping gate's baseline, the action expert's chunk blending, the simulator)
samples through ``Trajectory.sample``, so they agree to rounding.

Also here: the velocities a chunk carries (finite differences, the first one continuing
the running command, the last zero as the controller's end-point rule asks) and the
braking hold (a single point reached at constant deceleration within the acceleration
limits, which a cubic spline from the current command follows exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Trajectory:
    start: float  # s, on whichever clock its holder uses; point k applies at start + times[k]
    times: np.ndarray  # [H] time_from_start, s, strictly increasing
    positions: np.ndarray  # [H, N]
    velocities: np.ndarray | None = None  # [H, N], or None: linear interpolation
    # (t, position, velocity) of the command this one replaced, when point 0 lies after
    # the start: the controller runs from that state to point 0 (a braking hold)
    origin: tuple[float, np.ndarray, np.ndarray] | None = None

    @property
    def end(self) -> float:
        return self.start + float(self.times[-1])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(position, velocity) commanded at absolute time t. Before point 0 it is point 0
        (the previous command still runs there); after the last point it holds, at rest."""
        times, pos, vel = self.start + self.times, self.positions, self.velocities
        zero = np.zeros(pos.shape[1])
        if t >= times[-1]:
            return pos[-1].copy(), zero
        if t <= times[0]:
            v0 = zero if vel is None else vel[0]
            if self.origin is not None and self.origin[0] <= t < times[0]:
                t_o, p_o, v_o = self.origin
                h = times[0] - t_o
                if vel is None:  # positions only: linear from the state it took over
                    return p_o + (t - t_o) / h * (pos[0] - p_o), (pos[0] - p_o) / h
                return hermite(p_o, v_o, pos[0], v0, h, (t - t_o) / h)
            return pos[0].copy(), v0.copy()
        k = int(np.searchsorted(times, t, side='right'))
        h = times[k] - times[k - 1]
        s = (t - times[k - 1]) / h
        p0, p1 = pos[k - 1], pos[k]
        if vel is None:
            return p0 + s * (p1 - p0), (p1 - p0) / h
        return hermite(p0, vel[k - 1], p1, vel[k], h, s)

    def sample_positions(self, ts) -> np.ndarray:
        """``sample(t)[0]`` for every t of ``ts`` ([K] absolute times) -> [K, N], the points
        between two of the trajectory's in one vectorised pass (the same arithmetic)."""
        ts = np.asarray(ts, dtype=np.float64)
        times, pos, vel = self.start + self.times, self.positions, self.velocities
        out = np.empty((len(ts), pos.shape[1]))
        after = ts >= times[-1]
        before = ~after & (ts <= times[0])
        inside = ~(after | before)
        out[after] = pos[-1]
        for i in np.flatnonzero(before):  # before point 0 (a braking hold's origin): rare
            out[i] = self.sample(float(ts[i]))[0]
        if inside.any():
            t = ts[inside]
            k = np.searchsorted(times, t, side='right')
            h = (times[k] - times[k - 1])[:, None]
            s = ((t - times[k - 1]) / h[:, 0])[:, None]
            p0, p1 = pos[k - 1], pos[k]
            if vel is None:
                out[inside] = p0 + s * (p1 - p0)
            else:
                out[inside] = hermite(p0, vel[k - 1], p1, vel[k], h, s)[0]
        return out


def hermite(p0, v0, p1, v1, h: float, s: float) -> tuple[np.ndarray, np.ndarray]:
    """Cubic Hermite spline from (p0, v0) to (p1, v1) over h seconds, at fraction s."""
    s2, s3 = s * s, s * s * s
    p = (
        (2 * s3 - 3 * s2 + 1) * p0
        + (s3 - 2 * s2 + s) * h * v0
        + (-2 * s3 + 3 * s2) * p1
        + (s3 - s2) * h * v1
    )
    v = (
        (6 * s2 - 6 * s) / h * p0
        + (3 * s2 - 4 * s + 1) * v0
        + (-6 * s2 + 6 * s) / h * p1
        + (3 * s2 - 2 * s) * v1
    )
    return p, v


def point_velocities(
    times: np.ndarray, positions: np.ndarray, first: np.ndarray | None = None
) -> np.ndarray:
    """Velocities for each point: centred differences inside, ``first`` (the velocity of
    the command being replaced, so the join has no velocity jump) or a one-sided
    difference at point 0, and zero at the last point (joint_trajectory_controller's
    end-point rule; a chunk ends at rest)."""
    t = np.asarray(times, dtype=np.float64)
    p = np.asarray(positions, dtype=np.float64)
    v = np.zeros_like(p)
    if len(t) > 2:
        v[1:-1] = (p[2:] - p[:-2]) / (t[2:] - t[:-2])[:, None]
    if len(t) > 1:
        v[0] = (p[1] - p[0]) / (t[1] - t[0]) if first is None else first
    return v


def braking_point(
    position: np.ndarray, velocity: np.ndarray, acceleration: np.ndarray, min_s: float
) -> tuple[np.ndarray, float]:
    """Where a joint moving at ``velocity`` comes to rest, decelerating at most at
    ``acceleration``, all joints stopping together, and when (s, at least ``min_s``).

    The cubic spline from (p, v) to (p + v T / 2, 0) over T is exactly the constant
    deceleration v / T, so a one-point trajectory to this point brakes within the limits."""
    v = np.asarray(velocity, dtype=np.float64)
    duration = max(float(np.max(np.abs(v) / np.asarray(acceleration))), min_s)
    return np.asarray(position, dtype=np.float64) + v * duration / 2.0, duration


def braking_tail(
    last: np.ndarray,
    velocity: np.ndarray,
    acceleration: np.ndarray,
    period_s: float,
    max_points: int = 100,
) -> np.ndarray:
    """Points one period apart that continue from ``last`` at ``velocity`` and decelerate at
    ``acceleration`` until every joint is at rest ([K, N], K >= 1, the last two equal): a
    chunk ending with it ends at rest within the limits, wherever it is cut."""
    p = np.asarray(last, dtype=np.float64).copy()
    v = np.asarray(velocity, dtype=np.float64).copy()
    a = np.asarray(acceleration, dtype=np.float64)
    out = []
    for _ in range(max_points):
        if not np.any(v):
            break
        v_next = np.sign(v) * np.maximum(np.abs(v) - a * period_s, 0.0)
        p = p + v_next * period_s
        v = v_next
        out.append(p.copy())
    out.append(p.copy())
    return np.array(out)
