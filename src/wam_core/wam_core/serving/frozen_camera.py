"""Is a repeated picture a static scene or a frozen camera?

A camera driver that hangs may keep publishing its last frame (or replaying its last few)
with new stamps. A static scene repeats its picture too, and then reusing the
representation is right. What tells them apart is the arm: if it moved between the
moments two identical pictures were taken, a working camera would have shown it (in the
simulator, at the start pose, 0.01-0.03 mrad of most joints already changes a 128 px
render; a real sensor's noise changes every frame anyway).

Each picture is judged against its own first frame: the arm's motion between the joint
states at that frame's stamp and at the repeat's (max over joints). By stamps, not by
the moments the frames reached the world expert: the encoder's queue and the joint
states' own latency shift arrival times by tens of ms, and a braking arm moves in that
time; judged by arrival (the rule before), a threshold had to allow 0.003 rad, which a
slow arm took 160 ms to cover. By stamps a working camera's repeat shows the joint
sensors' noise, provided the camera and the joint states are stamped at capture on one
clock (as ros2_control and most camera drivers do). A camera stamped on receipt, tens of
ms late, can be called frozen for one frame when the arm starts from rest: the next
picture shows the motion and serves again.

The threshold is one number for all joints (rad; a prismatic joint's metres): it must
exceed what a joint can move without changing any view the world expert reads. A joint
out of every view (a wrist seen by no camera) would be refused as a frozen camera for as
long as the picture stays the same: the robot holds with that reason on /diagnostics.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict, deque

import numpy as np

# a joint state further than this from a picture's stamp says nothing about that picture
NEAREST_NS = 30_000_000
# joint states kept (2 s at 100 Hz): a picture's first frame is refined from them while there
HISTORY = 200
# a stamp further back than this is a clock step back, not a late joint state
STEP_BACK_NS = 50_000_000
# a repeat stamped this far before the newest joint state is from another time line
# (a clock that stepped back, whose states have not arrived yet)
REPEAT_BEHIND_NS = 250_000_000
# pictures remembered: a driver replaying its last few frames repeats each of them
PICTURES = 64


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
                if self._stamps[-1] - stamp_ns <= STEP_BACK_NS:
                    return  # a state delivered out of order: the newer ones tell more
                # the robot's clock stepped back: the older stamps are on another time line
                self._stamps.clear()
                self._positions.clear()
            self._stamps.append(stamp_ns)
            self._positions.append(np.asarray(q, dtype=float))

    def newest(self) -> int | None:
        with self._lock:
            return self._stamps[-1] if self._stamps else None

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
            if t1 - t0 <= 2 * NEAREST_NS:  # no gap in which the arm may have done anything
                w = (stamp_ns - t0) / (t1 - t0)
                return (1 - w) * self._positions[i - 1] + w * self._positions[i]
        near = min(
            (j for j in (i - 1, i) if 0 <= j < len(stamps)),
            key=lambda j: abs(stamps[j] - stamp_ns),
        )
        return self._positions[near] if abs(stamps[near] - stamp_ns) <= NEAREST_NS else None


class _Picture:
    __slots__ = ('stamp_ns', 'q')

    def __init__(self, stamp_ns: int, q: np.ndarray | None):
        self.stamp_ns = stamp_ns  # its first frame's stamp
        self.q = q  # the arm there


class FrozenCameraCheck:
    """Judges each repeat of a picture by the arm's motion since that picture's first
    frame (max over joints, between the joint states at the two stamps)."""

    def __init__(self, threshold: float, pictures: int = PICTURES):
        self.threshold = threshold  # rad (max over joints)
        self.joints = JointTrack()
        self._pictures: OrderedDict[str, _Picture] = OrderedDict()
        self._max_pictures = pictures
        self.unjudged = 0  # repeats the joint states could not tell about

    def seen(self, fp: str, stamp_ns: int) -> None:
        """A picture (fingerprint ``fp``) met at ``stamp_ns``: its first frame, unless it
        was met before (encoded again after a release switch or an eviction, it is still
        the same picture of the same arm pose)."""
        if fp in self._pictures:
            self._pictures.move_to_end(fp)
            return
        # the nearest state now; repeats refine it while the stamp is in the history (the
        # states after it arrive later), and keep it once the stamp has left it
        self._pictures[fp] = _Picture(stamp_ns, self.joints.at(stamp_ns))
        while len(self._pictures) > self._max_pictures:
            self._pictures.popitem(last=False)

    def motion(self, fp: str, stamp_ns: int) -> float | None:
        """The arm's motion between picture ``fp``'s first frame and ``stamp_ns`` (rad,
        max over joints), or None where the joint states cannot tell."""
        pic = self._pictures.get(fp)
        if pic is None:  # cached before this check knew it (a restarted world expert)
            self.seen(fp, stamp_ns)
            return None
        self._pictures.move_to_end(fp)
        refined = self.joints.at(pic.stamp_ns)
        if refined is not None:
            pic.q = refined
        newest = self.joints.newest()
        q = None
        if newest is not None and stamp_ns >= newest - REPEAT_BEHIND_NS:
            q = self.joints.at(stamp_ns)
        if pic.q is None or q is None or q.shape != pic.q.shape:
            self.unjudged += 1
            return None
        return float(np.max(np.abs(q - pic.q)))

    def frozen(self, fp: str, stamp_ns: int) -> float | None:
        """The motion if picture ``fp`` again, stamped ``stamp_ns``, is a frozen camera's,
        else None."""
        moved = self.motion(fp, stamp_ns)
        return moved if moved is not None and moved > self.threshold else None
