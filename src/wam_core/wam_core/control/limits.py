"""Joint limits and the clamping gate: every action that reaches the robot passes here.

Limits are the robot description's (``wam_core.common.robot``). ``ClampGate.apply`` turns a raw
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

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..common.robot import JointLimit

EPS = 1e-9
MAX_POINTS = 1000


class ChunkRejected(ValueError):
    """The chunk cannot be made safe; ``reason`` is a short counter key."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f'{reason}: {detail}')
        self.reason = reason


@dataclass
class GateResult:
    positions: np.ndarray  # [H, N] in configured joint order
    times: np.ndarray  # [H] time_from_start, s
    clamped_points: int  # points where any joint was changed
    change: np.ndarray | None = None  # [H, N] |gated - asked|, configured order


class GateActivity:
    """How much the gate rewrites, per joint: the share of points changed by more than a
    tolerance (1e-3 rad, 1e-4 m) and the size of the changes (p50/p99/max over the last
    ``window`` points). A nominal run should leave the gate nearly idle; a clamp count with
    a 1e-12 threshold says nothing about that."""

    def __init__(self, joint_names: Sequence[str], tolerances: Sequence[float], window=20000):
        self.joint_names = list(joint_names)
        self.tolerances = np.asarray(tolerances, dtype=np.float64)
        self.points = 0
        self.changed = np.zeros(len(self.joint_names), dtype=np.int64)
        self._window = window
        self._changes: deque[np.ndarray] = deque()
        self._kept = 0

    def add(self, change: np.ndarray) -> None:
        c = np.abs(np.asarray(change, dtype=np.float64))
        self.points += len(c)
        self.changed += np.sum(c > self.tolerances, axis=0)
        self._changes.append(c)
        self._kept += len(c)
        while self._kept - len(self._changes[0]) >= self._window:
            self._kept -= len(self._changes.popleft())

    def changed_share(self) -> dict[str, float]:
        n = max(self.points, 1)
        return {j: float(c) / n for j, c in zip(self.joint_names, self.changed, strict=True)}

    def overall_share(self) -> float:
        """Share of (point, joint) pairs changed by more than their tolerance."""
        return float(np.sum(self.changed)) / max(self.points * len(self.joint_names), 1)

    def summary(self) -> dict[str, dict[str, float]]:
        """Per joint: share changed, and p50/p99/max of the change (rad or m)."""
        all_c = np.concatenate(self._changes) if self._changes else np.zeros((0, 1))
        share = self.changed_share()
        out = {}
        for i, j in enumerate(self.joint_names):
            col = all_c[:, i] if len(all_c) else np.zeros(1)
            p50, p99 = np.percentile(col, [50, 99])
            out[j] = {
                'changed_share': share[j],
                'p50': float(p50),
                'p99': float(p99),
                'max': float(np.max(col)),
            }
        return out


class ClampGate:
    def __init__(
        self,
        joint_names: Sequence[str],
        limits: Mapping[str, JointLimit],
        period_s: float,
        scale: float = 1.0,
        contact_noise: float = 0.01,
    ):
        """``scale`` < 1 shrinks the velocity and acceleration limits: the action expert
        bounds its chunks a little inside the gate's, so the gate has nothing to do.
        ``contact_noise``: a measured baseline this share of a joint's range outside a
        limit is clipped in (``control.contact_noise_fraction``)."""
        self.joint_names = list(joint_names)
        self.contact_noise = contact_noise
        self.lower = np.array([limits[n].lower for n in joint_names])
        self.upper = np.array([limits[n].upper for n in joint_names])
        self.vmax = scale * np.array([limits[n].velocity for n in joint_names])
        self.amax = scale * np.array([limits[n].acceleration for n in joint_names])
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
        """positions [H, len(names)], times [H] (s from the chunk start), current [N]
        (configured order)."""
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
        prev = baseline_position(q, self.lower, self.upper, self.contact_noise)
        v_prev = None
        if current_velocity is not None and np.all(np.isfinite(current_velocity)):
            v_prev = np.asarray(current_velocity, dtype=np.float64)
        if self._within_bounds(p, t, prev, v_prev):
            # Nothing to clamp (the nominal case: the action expert bounds its chunks inside
            # these limits): the point-by-point pass below would return the chunk itself,
            # up to rounding, at ten times the cost.
            out = np.clip(p, self.lower, self.upper)
            self.chunks += 1
            return GateResult(out, t.copy(), 0, np.abs(out - p))
        out = np.empty_like(p)
        v_base = v_prev
        clamped = 0
        # numpy's ufuncs and array methods, not np.clip / np.any: on 7 joints their
        # Python-level wrappers cost more than the arithmetic (same results)
        maximum, minimum = np.maximum, np.minimum
        for k in range(p.shape[0]):
            dt = max(t[0], self.period_s) if k == 0 else t[k] - t[k - 1]
            v = (p[k] - prev) / dt
            lo, hi = self._bounds(prev, dt)
            if v_prev is not None and not (
                k == 0 and t[0] <= EPS
            ):  # point 0 "now" is not a segment
                ad = self.amax * dt
                lo = maximum(lo, v_prev - ad)
                hi = minimum(hi, v_prev + ad)
            if (lo > hi + EPS).any():
                j = int(np.argmax(lo - hi))
                self._reject(
                    'infeasible', f'no safe motion for {self.joint_names[j]} at point {k}'
                )
            v_safe = minimum(maximum(v, lo), maximum(lo, hi))
            if (np.abs(v_safe - v) * dt > 1e-12).any():
                clamped += 1
            out[k] = minimum(maximum(prev + v_safe * dt, self.lower), self.upper)  # rounding
            now_point = k == 0 and t[0] <= EPS and v_base is not None
            v_prev = v_base if now_point else (out[k] - prev) / dt
            prev = out[k]
        self.chunks += 1
        self.clamped_points += clamped
        return GateResult(out, t.copy(), clamped, np.abs(out - p))

    def _bounds(self, prev, dt):
        """(lo, hi) of the velocity from ``prev`` over ``dt`` (one point, or every point at
        once with dt as a column): the velocity limit, the room to the position limits,
        and the room to brake before them; the acceleration bound is the caller's (it
        depends on the segment before)."""
        maximum, minimum, sqrt = np.maximum, np.minimum, np.sqrt
        lower, upper, amax = self.lower, self.upper, self.amax
        ad = amax * dt
        ad2, two_a = ad * ad, 2.0 * amax
        # braking: (prev + v dt) + v|v|/(2a) within limits  <=>  v within these roots
        lo = maximum(
            maximum(-self.vmax, (lower - prev) / dt),
            ad - sqrt(maximum(ad2 + two_a * (prev - lower), 0.0)),
        )
        hi = minimum(
            minimum(self.vmax, (upper - prev) / dt),
            -ad + sqrt(maximum(ad2 + two_a * (upper - prev), 0.0)),
        )
        return lo, hi

    def _within_bounds(self, p, t, q0, v0) -> bool:
        """Whether every point of ``p`` already satisfies the bounds ``apply`` enforces
        point by point (velocity, position and braking room, acceleration from the previous
        segment), all points at once: then ``apply`` has nothing to change. Any doubt
        (a bound crossed, however slightly, or none feasible) is left to the exact pass."""
        dt = np.empty_like(t)
        dt[0] = max(t[0], self.period_s)
        dt[1:] = t[1:] - t[:-1]
        dt = dt[:, None]
        prev = np.empty_like(p)
        prev[0] = q0
        prev[1:] = p[:-1]
        v = (p - prev) / dt
        lo, hi = self._bounds(prev, dt)
        # the velocity of the segment before each point, as apply carries it
        now_point = t[0] <= EPS
        v_before = np.empty_like(v)
        v_before[1:] = v[:-1]
        if v0 is not None:
            v_before[0] = v0
            if now_point and len(v) > 1:  # point 0 "now" is not a segment: v0 carries on
                v_before[1] = v0
        rows = slice(0, None) if v0 is not None and not now_point else slice(1, None)
        ad = self.amax * dt[rows]
        lo[rows] = np.maximum(lo[rows], v_before[rows] - ad)
        hi[rows] = np.minimum(hi[rows], v_before[rows] + ad)
        return bool(((lo <= v) & (v <= hi)).all())


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
    prev = baseline_position(
        np.asarray(current, dtype=np.float64), gate.lower, gate.upper, gate.contact_noise
    )
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


def baseline_position(
    q: np.ndarray, lower: np.ndarray, upper: np.ndarray, fraction: float = 0.01
) -> np.ndarray:
    """A measured position within ``fraction`` of the range outside a limit is contact
    noise: clip it in."""
    tol = fraction * (upper - lower)
    inside = (q >= lower - tol) & (q <= upper + tol)
    return np.where(inside, np.clip(q, lower, upper), q)


def trajectory_violations(
    gate: ClampGate, joint_names: Sequence[str], positions, times, tol: float = 1e-6
) -> list[str]:
    """An independent check of a trajectory as the robot receives it, without knowing its
    baseline (recorders, fuzzing): the joints in the gate's order, finite values, position
    limits, and the velocity between consecutive points. Empty when it is safe."""
    if list(joint_names) != gate.joint_names:
        return ['joint names']
    try:
        p = np.asarray(positions, dtype=float)
        t = np.asarray(times, dtype=float)
    except ValueError:  # ragged point lists
        return ['shape']
    if p.ndim != 2 or p.shape[1] != len(gate.joint_names) or t.shape != (p.shape[0],):
        return ['shape']
    if not (np.all(np.isfinite(p)) and np.all(np.isfinite(t))):
        return ['non-finite']
    bad = []
    if np.any(p < gate.lower - tol) or np.any(p > gate.upper + tol):
        bad.append('position limit')
    if len(p) > 1 and np.any(np.abs(np.diff(p, axis=0)) > gate.vmax * np.diff(t)[:, None] + tol):
        bad.append('velocity limit')
    return bad
