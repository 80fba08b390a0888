"""Is a repeated picture a static scene or a frozen camera?

A camera driver that hangs may keep publishing its last frame with new stamps. A static
scene repeats its picture too, and then reusing the representation is right. What tells
them apart is the arm: if it moved between the moments the two pictures were taken, a
working camera would show it (in the simulator a 1e-5 rad joint motion already changes a
128 px render; a real sensor's noise changes every frame anyway).

The motion is judged between the *stamps* of the pictures, from the joint states with the
nearest stamps, not between the moments they reached the world expert: the encoder's
queue and the joint states' own latency shift arrival times by tens of ms, and a braking
arm moves in that time, so judged by arrival a working camera's repeat can look like
motion (the likely cause of the false alarm that had an earlier arrival-based rule
reverted) and the rule had to wait for 0.003 rad, which a slow arm took 160 ms to cover.
Judged by stamps, a working camera's repeat shows only the joint sensors' noise, and a
small threshold holds.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque

import numpy as np

# a joint state further than this from a picture's stamp says nothing about that picture
NEAREST_NS = 30_000_000
# joint states kept: 2 s at 100 Hz (a picture is judged on arrival, tens of ms after its stamp)
HISTORY = 200


class JointTrack:
    """The arm's recent joint positions by stamp (from /joint_states). Written by the
    node's callbacks, read by the encoder's thread: under a lock."""

    def __init__(self, history: int = HISTORY):
        self._stamps: deque[int] = deque(maxlen=history)
        self._positions: deque[np.ndarray] = deque(maxlen=history)
        self._lock = threading.Lock()

    def add(self, stamp_ns: int, q: np.ndarray) -> None:
        with self._lock:
            if self._stamps and stamp_ns < self._stamps[-1]:
                # the robot's clock stepped back: the older stamps are on another time line
                self._stamps.clear()
                self._positions.clear()
            self._stamps.append(stamp_ns)
            self._positions.append(np.asarray(q, dtype=float))

    def at(self, stamp_ns: int) -> np.ndarray | None:
        """Joint positions at ``stamp_ns``: interpolated between the states around it, or
        the nearest one within NEAREST_NS; None if there is none that close."""
        with self._lock:
            return self._at(stamp_ns)

    def _at(self, stamp_ns: int) -> np.ndarray | None:
        stamps = self._stamps
        if not stamps:
            return None
        i = bisect.bisect_left(stamps, stamp_ns)
        if 0 < i < len(stamps):
            t0, t1 = stamps[i - 1], stamps[i]
            if t1 - t0 <= 2 * NEAREST_NS:
                w = (stamp_ns - t0) / (t1 - t0) if t1 > t0 else 1.0
                return (1 - w) * self._positions[i - 1] + w * self._positions[i]
        near = min(
            (j for j in (i - 1, i) if 0 <= j < len(stamps)),
            key=lambda j: abs(stamps[j] - stamp_ns),
        )
        return self._positions[near] if abs(stamps[near] - stamp_ns) <= NEAREST_NS else None


class FrozenCameraCheck:
    """Judges each repeat of the current picture by the arm's motion since that picture
    was first taken (max over joints, between the joint states at the two stamps)."""

    def __init__(self, threshold: float):
        self.threshold = threshold  # rad (max over joints)
        self.joints = JointTrack()
        self._content: str | None = None  # the current picture's fingerprint
        self._content_stamp: int | None = None
        self._content_q: np.ndarray | None = None

    def new_content(self, fp: str, stamp_ns: int) -> None:
        """A new picture (fingerprint ``fp``), first taken at ``stamp_ns``."""
        self._content = fp
        self._content_stamp = stamp_ns
        # the nearest state now; the repeats refine it while the stamp is in the history
        # (the states after it arrive later), and keep it once the stamp has left it
        self._content_q = self.joints.at(stamp_ns)

    def motion(self, fp: str, stamp_ns: int) -> float | None:
        """The arm's motion between picture ``fp``'s first stamp and ``stamp_ns`` (rad, max
        over joints), or None where the joint states cannot tell."""
        if fp != self._content:  # a picture cached earlier (or by a restarted expert)
            self.new_content(fp, stamp_ns)
            return None
        refined = self.joints.at(self._content_stamp)
        if refined is not None:
            self._content_q = refined
        q = self.joints.at(stamp_ns)
        if self._content_q is None or q is None or q.shape != self._content_q.shape:
            return None
        return float(np.max(np.abs(q - self._content_q)))

    def frozen(self, fp: str, stamp_ns: int) -> float | None:
        """The motion if picture ``fp`` again, stamped ``stamp_ns``, is a frozen camera's,
        else None."""
        moved = self.motion(fp, stamp_ns)
        return moved if moved is not None and moved > self.threshold else None
