"""One observation from several cameras: the views whose stamps lie within a tolerance.

As message_filters' approximate-time policy, for the newest frames: each view keeps its
last few frames (``depth``); when a frame arrives, the newest frame of each other view
within ``tolerance`` of it completes an observation, which is emitted and uses up every
frame up to it (a serving loop never wants an older set). A camera that runs a frame
late still pairs; a frame that leaves its ring unpaired is an observation lost, and the
views it waited for are counted as missing (``missing[view]``), so a camera that stalls
shows up by name while the representation ages and the action expert holds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence


class ViewSync:
    def __init__(self, views: Sequence[str], tolerance_ns: int, depth: int = 4):
        if not views or len(set(views)) != len(views):
            raise ValueError(f'view names must be unique and non-empty: {list(views)}')
        self.views = tuple(views)
        self.tolerance_ns = int(tolerance_ns)
        self._rings: dict[str, deque] = {v: deque() for v in self.views}  # (stamp, frame)
        self.depth = depth
        self.missing = dict.fromkeys(self.views, 0)  # observations lost waiting for a view
        self.observations = 0

    def _partner(self, view: str, stamp_ns: int):
        """The newest frame of ``view`` within the tolerance of ``stamp_ns``, or None."""
        for s, frame in reversed(self._rings[view]):
            if abs(s - stamp_ns) <= self.tolerance_ns:
                return s, frame
        return None

    def _lost(self, view: str, stamp_ns: int) -> None:
        for v in self.views:
            if v != view and self._partner(v, stamp_ns) is None:
                self.missing[v] += 1

    def put(self, view: str, stamp_ns: int, frame) -> dict[str, object] | None:
        """A view's frame -> {view: frame} when it completes an observation, else None."""
        if view not in self._rings:
            raise KeyError(f'unknown view {view!r} (views: {self.views})')
        ring = self._rings[view]
        ring.append((stamp_ns, frame))
        if len(ring) > self.depth:  # the oldest leaves unpaired: that observation is lost
            self._lost(view, ring.popleft()[0])
        matched = {view: (stamp_ns, frame)}
        for v in self.views:
            if v != view:
                got = self._partner(v, stamp_ns)
                if got is None:
                    return None
                matched[v] = got
        for v, (s, _) in matched.items():  # used up, with everything older
            r = self._rings[v]
            while r and r[0][0] < s:  # older and never paired: a lost observation
                self._lost(v, r.popleft()[0])
            if r and r[0][0] == s:
                r.popleft()
        self.observations += 1
        return {v: f for v, (_, f) in matched.items()}
