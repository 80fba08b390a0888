"""One observation from several cameras: the views whose stamps lie within a tolerance.

As message_filters' approximate-time policy, but for the newest frames only (a serving
loop never wants an old set): each view keeps its latest frame; when a frame arrives
and every view has one within ``tolerance`` of it, they form one observation and are
used up. A frame that is replaced before its partners arrived is an observation lost;
the views it waited for are counted as missing (``missing[view]``), so a camera that
stalls shows up by name while the representation ages and the action expert holds.
"""

from __future__ import annotations

from collections.abc import Sequence


class ViewSync:
    def __init__(self, views: Sequence[str], tolerance_ns: int):
        if not views or len(set(views)) != len(views):
            raise ValueError(f'view names must be unique and non-empty: {list(views)}')
        self.views = tuple(views)
        self.tolerance_ns = int(tolerance_ns)
        self._latest: dict[str, tuple[int, object]] = {}  # view -> (stamp_ns, frame)
        self.missing = dict.fromkeys(self.views, 0)  # observations lost waiting for a view
        self.observations = 0

    def put(self, view: str, stamp_ns: int, frame) -> dict[str, object] | None:
        """A view's frame -> {view: frame} when it completes an observation, else None."""
        if view not in self.missing:
            raise KeyError(f'unknown view {view!r} (views: {self.views})')
        if view in self._latest:  # replaced before its partners came: that set is lost
            old = self._latest[view][0]
            for v in self.views:
                partner = self._latest.get(v)
                if v != view and (partner is None or abs(partner[0] - old) > self.tolerance_ns):
                    self.missing[v] += 1
        self._latest[view] = (stamp_ns, frame)
        matched = {}
        for v in self.views:
            got = self._latest.get(v)
            if got is None or abs(got[0] - stamp_ns) > self.tolerance_ns:
                return None
            matched[v] = got[1]
        self._latest.clear()
        self.observations += 1
        return matched
