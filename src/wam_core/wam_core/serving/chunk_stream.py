"""From the action expert's raw chunks to the trajectories the robot executes.

The model's chunk row k is its target k control periods after the tick's observation.
``ChunkStream`` turns each into a trajectory a joint_trajectory_controller can follow
without a jump, and decides what a tick without a usable representation does:

- **Stamped for when it applies.** ``header.stamp`` is a time on the control grid
  ``lead`` periods after the tick (the caller picks ``lead`` from the measured serving
  latency, so point 0 is not in the past when the controller receives it); point j is
  row ``lead + j``.
- **Joined, not replaced.** Point 0 is where the running command is at the stamp; the
  new chunk blends in over ``blend_points`` points (a smoothstep weight), in the spirit
  of real-time chunking and LeRobot's chunk aggregation. The first velocity is the
  running command's, so neither position nor velocity jumps at the join.
- **Feasible by construction.** The blended chunk is bounded by the clamping gate's own
  algorithm at ``scale`` (< 1) of the velocity and acceleration limits, from the same
  baseline the harness's gate will use, so in nominal operation the gate is idle.
- **Ends at rest.** A braking tail (within the acceleration limits) follows the last
  point, whose velocity is zero (the controller's end-point rule): cut anywhere, the
  robot stops safely.
- **hold_last_action.** When a tick has nothing usable, nothing is published while the
  last valid chunk is still running and began at most ``max_open_loop_s`` ago: the robot
  keeps executing it (``open_loop``). After that, a one-point braking hold from the
  running command (``held``), decelerating within the limits to rest, never a jump to
  the measured position. Every degraded tick is counted by outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..common.robot import JointLimit
from ..control.command_tracker import CommandTracker
from ..control.limits import ClampGate
from ..control.trajectory import Trajectory, braking_point, braking_tail, point_velocities

OPEN_LOOP, HELD = 'open_loop', 'held'


def blend_weights(n: int, window: int) -> np.ndarray:
    """Weight of the new chunk at each of n points: 0 at point 0, 1 from point ``window``."""
    if window <= 0:
        return np.ones(n)
    s = np.clip(np.arange(n) / window, 0.0, 1.0)
    return s * s * (3.0 - 2.0 * s)


class ChunkStream:
    def __init__(
        self,
        joint_names: Sequence[str],
        limits: Mapping[str, JointLimit],
        period_s: float,
        max_open_loop_s: float = 0.1,
        blend_points: int = 3,
        scale: float = 0.97,
        max_command_deviation: float = 0.15,
        contact_noise: float = 0.01,
    ):
        """``max_command_deviation`` and ``contact_noise``: the control section's, the same
        numbers as the harness gate's, so both start a chunk from the same baseline."""
        self.joint_names = list(joint_names)
        self.period_s = period_s
        self.max_open_loop_s = max_open_loop_s
        self.blend_points = blend_points
        self.bound = ClampGate(joint_names, limits, period_s, scale, contact_noise)
        # what this stream sent: the next chunk's baseline
        self.tracker = CommandTracker(max_command_deviation)
        self.last_valid_stamp: float | None = None
        self.outcomes = {OPEN_LOOP: 0, HELD: 0}

    @property
    def command(self) -> Trajectory | None:
        return self.tracker.command

    def chunk(self, raw: np.ndarray, tick_s: float, lead: int, measured) -> Trajectory:
        """A valid chunk [H, N] computed at tick_s (s, the clock of the stamps) ->
        the trajectory to publish. Raises ChunkRejected if it cannot be made feasible."""
        raw = np.asarray(raw, dtype=np.float64)
        if raw.ndim != 2 or len(raw) < 3:
            raise ValueError(f'a chunk needs at least 3 rows, got shape {raw.shape}')
        lead = min(max(1, lead), len(raw) - 2)
        stamp = tick_s + lead * self.period_s
        rows = raw[lead:]
        base, vel = self.tracker.baseline(stamp, measured)
        cmd = self.tracker.command
        if vel is not None and cmd is not None:
            w = blend_weights(len(rows), self.blend_points)[:, None]
            old = cmd.sample_positions(stamp + self.period_s * np.arange(len(rows)))
            rows = (1.0 - w) * old + w * rows
        times = self.period_s * np.arange(len(rows))
        pos = self.bound.apply(self.joint_names, rows, times, base, vel).positions
        # the braking tail continues what was bounded (at the bound's acceleration, and the
        # bound's braking rule keeps room to stop inside the position limits)
        end_v = (pos[-1] - pos[-2]) / self.period_s
        tail = braking_tail(pos[-1], end_v, self.bound.amax, self.period_s)
        pos = np.vstack([pos, np.clip(tail, self.bound.lower, self.bound.upper)])
        times = self.period_s * np.arange(len(pos))
        # (without the command's velocity, the first segment's: as the harness gate)
        traj = Trajectory(stamp, times, pos, point_velocities(times, pos, vel))
        self.tracker.record(stamp, times, pos, traj.velocities)
        self.last_valid_stamp = stamp
        return traj

    def within_open_loop(self, stamp: float) -> bool:
        """Whether the robot may keep executing the running chunk at ``stamp``: a chunk
        (not a hold) that began at most ``max_open_loop_s`` before and has not ended."""
        cmd = self.tracker.command
        return (
            cmd is not None
            and self.last_valid_stamp is not None
            and len(cmd.times) > 1
            and stamp - self.last_valid_stamp <= self.max_open_loop_s + 1e-9
            and stamp < cmd.end
        )

    def degraded(self, tick_s: float, lead: int, measured) -> Trajectory | None:
        """A tick with nothing usable: None to keep executing the running chunk (open
        loop), or the braking hold to publish."""
        stamp = tick_s + max(1, lead) * self.period_s
        if self.within_open_loop(stamp):
            self.outcomes[OPEN_LOOP] += 1
            return None
        self.outcomes[HELD] += 1
        return self.hold(stamp, measured)

    def hold(self, stamp: float, measured) -> Trajectory:
        """Brake from the running command to rest (or hold where the robot is when there
        is none), within the limits; republished, it ends at the same point and time."""
        cmd = self.tracker.command
        base, vel = self.tracker.baseline(stamp, measured)
        if cmd is not None and len(cmd.times) == 1 and vel is not None and stamp < cmd.end:
            point, duration = cmd.positions[0], cmd.end - stamp  # already braking: keep it
        else:
            v = np.zeros_like(base) if vel is None else vel
            point, duration = braking_point(base, v, self.bound.amax, self.period_s)
        point = np.clip(point, self.bound.lower, self.bound.upper)
        duration = max(duration, self.period_s)
        traj = Trajectory(
            stamp, np.array([duration]), point.reshape(1, -1), np.zeros((1, len(point)))
        )
        self.tracker.record(stamp, traj.times, traj.positions, traj.velocities, (base, vel))
        return traj
