"""Joint limits and the clamping gate: every action that reaches the robot passes here.

Limits are URDF-style per joint (lower/upper in rad or m, velocity, effort) plus an
acceleration limit as in ros2_control's joint_limits. ``ClampGate.apply`` turns a raw
chunk into one that respects position, velocity and acceleration limits, or rejects
it whole (non-finite values, wrong joints, bad timing, or no feasible motion).

The baseline is where the robot is *commanded* to be now and how fast that command
moves: the last forwarded trajectory evaluated at the chunk's start (``CommandTracker``),
as ros2_control limits the command stream. Basing every chunk on the measured position
instead would restart each 50 Hz chunk from rest, and a position-controlled arm, whose
measured position lags its command, would crawl. Without a usable command (start-up, a
hold, a command far from the measured position) the baseline is the measured position.

Per joint and point k (dt_k = t_k - t_{k-1}; dt_0 = max(t_0, period) from the baseline
position to point 0), the velocity of segment k is clipped into the intersection of
  [-v_max, v_max]                                  velocity limit
  [v_{k-1} - a dt_k, v_{k-1} + a dt_k]             acceleration limit (k >= 1)
  [(lower - p_{k-1}) / dt_k, (upper - p_{k-1}) / dt_k]   position limits
  braking bounds so that, decelerating at a, the joint can still stop inside the
  limits: (p + v dt) + v^2 / (2a) <= upper (and the mirror for lower).
A point 0 at t = 0 is "the position now": it may move the command by at most one
period at the velocity limit, and the acceleration of point 1 counts from the baseline
velocity. A baseline a hair outside the position limits (contact noise) is clipped in.
An empty intersection (the robot already moves too fast towards a limit, or is
outside its limits) rejects the chunk: the robot then finishes the last safe chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPS = 1e-9
MAX_POINTS = 1000


class ChunkRejected(ValueError):
    """The chunk cannot be made safe; ``reason`` is a short counter key."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f'{reason}: {detail}')
        self.reason = reason


@dataclass
class JointLimit:
    lower: float
    upper: float
    velocity: float  # rad/s (m/s)
    effort: float = 0.0  # recorded for completeness; position control does not use it
    acceleration: float = 10.0

    def validate(self, name: str) -> None:
        vals = (self.lower, self.upper, self.velocity, self.acceleration)
        if (
            not all(math.isfinite(v) for v in vals)
            or self.lower >= self.upper
            or self.velocity <= 0
            or self.acceleration <= 0
        ):
            raise ValueError(f'bad limits for joint {name!r}: {self}')


def limits_from_dict(
    joint_names: Sequence[str], data: dict[str, dict[str, float]]
) -> dict[str, JointLimit]:
    """{'joint': {'lower':..,'upper':..,'velocity':..,'effort':..,'acceleration':..}} -> limits."""
    out = {}
    for name in joint_names:
        if name not in data:
            raise ValueError(f'no limits configured for joint {name!r}')
        spec = data[name]
        lim = JointLimit(
            float(spec['lower']),
            float(spec['upper']),
            float(spec['velocity']),
            float(spec.get('effort', 0.0)),
            float(spec.get('acceleration', 10.0)),
        )
        lim.validate(name)
        out[name] = lim
    return out


@dataclass
class GateResult:
    positions: np.ndarray  # [H, N] in configured joint order
    times: np.ndarray  # [H] time_from_start, s
    clamped_points: int  # points where any joint was changed


class ClampGate:
    def __init__(self, joint_names: Sequence[str], limits: dict[str, JointLimit], period_s: float):
        self.joint_names = list(joint_names)
        self.lower = np.array([limits[n].lower for n in joint_names])
        self.upper = np.array([limits[n].upper for n in joint_names])
        self.vmax = np.array([limits[n].velocity for n in joint_names])
        self.amax = np.array([limits[n].acceleration for n in joint_names])
        self.period_s = period_s
        self.chunks = 0
        self.clamped_points = 0
        self.rejected: dict[str, int] = {}

    def _reject(self, reason: str, detail: str):
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        raise ChunkRejected(reason, detail)

    def _order(self, names: Sequence[str]) -> np.ndarray:
        if (
            len(names) != len(self.joint_names)
            or set(names) != set(self.joint_names)
            or len(set(names)) != len(names)
        ):
            self._reject('joint_names', f'got {list(names)[:10]}, robot has {self.joint_names}')
        where = {n: i for i, n in enumerate(names)}
        return np.array([where[n] for n in self.joint_names])

    def apply(
        self,
        names: Sequence[str],
        positions,
        times,
        current: np.ndarray,
        current_velocity: np.ndarray | None = None,
    ) -> GateResult:
        """positions [H, len(names)], times [H] (s from the chunk start), current [N] (configured order)."""
        order = self._order(names)
        p = np.asarray(positions, dtype=np.float64)
        t = np.asarray(times, dtype=np.float64)
        if (
            p.ndim != 2
            or p.shape[0] == 0
            or p.shape[1] != len(self.joint_names)
            or t.shape != (p.shape[0],)
        ):
            self._reject('shape', f'positions {p.shape}, times {t.shape}')
        if p.shape[0] > MAX_POINTS:
            self._reject('shape', f'{p.shape[0]} points > {MAX_POINTS}')
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(t))):
            self._reject('non_finite', 'NaN/inf in positions or times')
        if t[0] < 0 or np.any(np.diff(t) <= 0):
            self._reject('times', 'time_from_start must start >= 0 and strictly increase')
        q = np.asarray(current, dtype=np.float64)
        if q.shape != (len(self.joint_names),) or not np.all(np.isfinite(q)):
            self._reject('joint_state', 'no valid current joint state')
        p = p[:, order]
        out = np.empty_like(p)
        prev = baseline_position(q, self.lower, self.upper)
        v_prev = None
        if current_velocity is not None and np.all(np.isfinite(current_velocity)):
            v_prev = np.asarray(current_velocity, dtype=np.float64)
        v_base = v_prev
        clamped = 0
        for k in range(p.shape[0]):
            dt = max(t[0], self.period_s) if k == 0 else t[k] - t[k - 1]
            v = (p[k] - prev) / dt
            lo = np.maximum(-self.vmax, (self.lower - prev) / dt)
            hi = np.minimum(self.vmax, (self.upper - prev) / dt)
            if v_prev is not None and not (
                k == 0 and t[0] <= EPS
            ):  # point 0 "now" is not a segment
                lo = np.maximum(lo, v_prev - self.amax * dt)
                hi = np.minimum(hi, v_prev + self.amax * dt)
            # braking: (prev + v dt) + v|v|/(2a) within limits  <=>  v within these roots
            ad = self.amax * dt
            hi = np.minimum(
                hi, -ad + np.sqrt(np.maximum(ad * ad + 2 * self.amax * (self.upper - prev), 0.0))
            )
            lo = np.maximum(
                lo, ad - np.sqrt(np.maximum(ad * ad + 2 * self.amax * (prev - self.lower), 0.0))
            )
            if np.any(lo > hi + EPS):
                j = int(np.argmax(lo - hi))
                self._reject(
                    'infeasible', f'no safe motion for {self.joint_names[j]} at point {k}'
                )
            v_safe = np.clip(v, lo, np.maximum(lo, hi))
            if np.any(np.abs(v_safe - v) * dt > 1e-12):
                clamped += 1
            out[k] = np.clip(prev + v_safe * dt, self.lower, self.upper)  # rounding only
            now_point = k == 0 and t[0] <= EPS and v_base is not None
            v_prev = v_base if now_point else (out[k] - prev) / dt
            prev = out[k]
        self.chunks += 1
        self.clamped_points += clamped
        return GateResult(out, t.copy(), clamped)


def default_limits(joint_names: Sequence[str]) -> dict[str, JointLimit]:
    """Conservative limits for the default 6-DoF arm + gripper (rad, rad/s, rad/s^2)."""
    out = {}
    for n in joint_names:
        if 'gripper' in n:
            out[n] = JointLimit(0.0, 0.04, 0.1, 20.0, 1.0)  # prismatic finger, metres
        else:
            out[n] = JointLimit(-2.9, 2.9, 1.5, 50.0, 8.0)
    return out


def check_trajectory(
    positions: np.ndarray,
    times: np.ndarray,
    current: np.ndarray,
    gate: ClampGate,
    tol: float = 1e-6,
    current_velocity: np.ndarray | None = None,
) -> list[str]:
    """Independent check (used by tests and recorders): the list of violated limits."""
    bad = []
    p = np.asarray(positions)
    if np.any(p < gate.lower - tol) or np.any(p > gate.upper + tol):
        bad.append('position')
    prev = baseline_position(np.asarray(current, dtype=np.float64), gate.lower, gate.upper)
    v_prev = v_base = (
        None if current_velocity is None else np.asarray(current_velocity, dtype=np.float64)
    )
    for k in range(len(p)):
        dt = max(times[0], gate.period_s) if k == 0 else times[k] - times[k - 1]
        v = (p[k] - prev) / dt
        if np.any(np.abs(v) > gate.vmax + tol / dt):
            bad.append(f'velocity@{k}')
        if (
            v_prev is not None
            and not (k == 0 and times[0] <= EPS)
            and np.any(np.abs(v - v_prev) > gate.amax * dt + 2 * tol / dt)
        ):
            bad.append(f'acceleration@{k}')
        prev = p[k]
        v_prev = v_base if (k == 0 and times[0] <= EPS and v_base is not None) else v
    return bad


def baseline_position(q: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """A measured position within 1% of the range outside a limit is contact noise: clip it in."""
    tol = 0.01 * (upper - lower)
    inside = (q >= lower - tol) & (q <= upper + tol)
    return np.where(inside, np.clip(q, lower, upper), q)


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
