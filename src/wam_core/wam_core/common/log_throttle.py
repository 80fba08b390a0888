"""Quiet logs for conditions that recur every tick or frame.

A degraded tick, a rejected frame or a clamped chunk can happen fifty times a second;
one log line each buries the lines that matter (ros2_controllers log such conditions
once per interval). ``ReasonThrottle`` lets the first occurrence of each reason through
at once, then at most one line per ``interval_s`` per reason, carrying how many
occurred since the previous line, so nothing is hidden and the count stays exact.
State changes (a stop, a release, a recovery) are not throttled: they log directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ReasonThrottle:
    def __init__(self, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[str, float] = {}  # reason -> when its last line was let through
        self._since: dict[str, int] = {}  # reason -> occurrences since that line

    def note(self, reason: str) -> str | None:
        """One occurrence of ``reason``: None to stay quiet, else the suffix for the line
        to log ('' for the first occurrence, ' (N times in the last T s)' after that)."""
        now = self.clock()
        self._since[reason] = self._since.get(reason, 0) + 1
        last = self._last.get(reason)
        if last is not None and now - last < self.interval_s:
            return None
        count = self._since[reason]
        self._last[reason] = now
        self._since[reason] = 0
        if last is None or count <= 1:
            return ''
        return f' ({count} times in the last {now - last:.1f} s)'
