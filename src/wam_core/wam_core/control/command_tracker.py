"""The command the robot is following: the clamping gate's baseline for the next chunk.

A position-controlled arm lags its command; basing each 50 Hz chunk on the measured
position would restart it from rest every period and the arm would crawl. The gate
therefore starts each chunk from the last forwarded trajectory, sampled the way the
controller follows it (``trajectory.Trajectory``), unless the robot has stopped
following it. The action expert keeps one too, for what it published, so that its
chunks start where the gate will evaluate them.
"""

from __future__ import annotations

import numpy as np

from .trajectory import Trajectory


class CommandTracker:
    """The trajectory last sent to the robot, followed as the controller does (linear
    between points, or cubic with velocities; holding the last).

    ``baseline(t, measured)`` -> (position, velocity or None). It falls back to the
    measured position when nothing was sent, or when the command has drifted more than
    ``max_deviation`` from it (a stopped or blocked robot does not follow its command).
    """

    def __init__(self, max_deviation: float = 0.15):
        self.max_deviation = max_deviation
        self.command: Trajectory | None = None
        # the command the newest one replaces: it still runs until the newest one's stamp
        # (chunks are stamped ahead of when they are sent)
        self.previous: Trajectory | None = None

    def record(self, start_s: float, times, positions, velocities=None, from_state=None) -> None:
        """The trajectory sent, starting at ``start_s``. ``from_state`` (position,
        velocity or None): the state it was bounded from, ``baseline(start_s, ...)``, which
        the robot is taken to run from to a point 0 that lies ahead (a braking hold); by
        default the replaced command's state at ``start_s``. The two differ when the
        baseline fell back to the measured position: a trajectory recorded as running from
        the abandoned command then gave the next chunk a baseline on the way from there,
        at several times the velocity limit, and the gate refused it as infeasible
        (synthetic robots, which do not follow their commands, 2026-12-07)."""
        t = np.asarray(times, dtype=np.float64)
        p = np.asarray(positions, dtype=np.float64).reshape(len(t), -1)
        v = None if velocities is None else np.asarray(velocities, dtype=np.float64)
        origin = None
        if self.command is not None and self.command.positions.shape[1] != p.shape[1]:
            self.command = None
        if t[0] > 0 and from_state is not None:
            position, velocity = from_state
            position = np.asarray(position, dtype=np.float64)
            velocity = np.zeros_like(position) if velocity is None else velocity
            origin = (start_s, position, np.asarray(velocity, dtype=np.float64))
        elif self.command is not None and t[0] > 0:
            # point 0 lies ahead (a braking hold): the robot runs there from the command
            # this one replaces, as joint_trajectory_controller does
            origin = (start_s, *self.sample(start_s))
        self.previous = self.command
        self.command = Trajectory(start_s, t, p, v, origin)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The commanded (position, velocity) at t: the previous command before the newest
        one's stamp, the newest from then on."""
        if self.previous is not None and t < self.command.start:
            return self.previous.sample(t)
        return self.command.sample(t)

    def reset(self) -> None:
        self.command = self.previous = None

    @property
    def end(self) -> float | None:
        """When the command runs out (its last point), or None."""
        return None if self.command is None else self.command.end

    def baseline(self, t: float, measured: np.ndarray):
        measured = np.asarray(measured, dtype=np.float64)
        cmd = self.command
        if cmd is None or cmd.positions.shape[1] != measured.shape[0]:
            return measured, None
        p, v = self.sample(t)
        if np.max(np.abs(p - measured)) > self.max_deviation:
            return measured, None
        return p, v
