"""The stack's one wall clock, and steps in it.

Stamps (camera frames, chunks, the cache's observation ages, the controller's deadlines)
are wall time, as ROS stamps are; deadlines and rates are monotonic time. The two are
tied by ``wall - monotonic``, which is constant but for drift, until the wall clock is
stepped (NTP correcting a large error, a VM resumed, an operator): then every stamp taken
before the step is off by the step. So:

- every wall-clock read of the stack goes through ``wall_ns()``/``wall_s()``;
- a monotonic deadline is turned into wall time with the offset read *now*
  (``WallClock.to_wall``), never with one frozen at start-up (a frozen offset made every
  chunk after a step "late", or let a late one through, until a restart);
- ``WallClock`` notices a step (the offset moving by more than ``step_bound_s`` between
  reads: drift is microseconds a second) and counts it, for the node's diagnostics.

A drill needs to step the clock the stack's processes see without touching the
machine's: with ``WAM_CLOCK_SHIFT_FILE`` set, ``wall_ns()`` adds the shift written in that
file (nanoseconds, re-read when the file changes). Unset, it is ``time.time_ns()``.
"""

from __future__ import annotations

import bisect
import os
import time

SHIFT_ENV = 'WAM_CLOCK_SHIFT_FILE'

_shift = {'path': None, 'mtime': None, 'ns': 0, 'checked': 0.0}


def injected_shift_ns() -> int:
    """The shift a drill injects (0 without ``WAM_CLOCK_SHIFT_FILE``); the file is looked
    at no more than every millisecond."""
    path = os.environ.get(SHIFT_ENV)
    if not path:
        return 0
    now = time.monotonic()
    if path == _shift['path'] and now - _shift['checked'] < 1e-3:
        return _shift['ns']
    _shift['checked'] = now
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        _shift.update(path=path, mtime=None, ns=0)
        return 0
    if path != _shift['path'] or mtime != _shift['mtime']:
        try:
            with open(path, encoding='ascii') as fh:
                ns = int(fh.read().strip() or 0)
        except (OSError, ValueError):
            ns = _shift['ns'] if path == _shift['path'] else 0
        _shift.update(path=path, mtime=mtime, ns=ns)
    return _shift['ns']


# (system ns, shift ns): the steps this process wrote, the first entry the shift before
_written: list[tuple[int, int]] = []


def write_shift(path: str, shift_ns: int) -> None:
    """For a drill: step the clock every process reading ``path`` sees (atomically)."""
    if not _written:
        _written.append((0, injected_shift_ns()))
    tmp = f'{path}.tmp{os.getpid()}'
    with open(tmp, 'w', encoding='ascii') as fh:
        fh.write(str(int(shift_ns)))
    os.replace(tmp, path)
    _written.append((time.time_ns(), int(shift_ns)))


def shift_at(system_ns: int) -> int:
    """The injected shift in force at a system-clock instant, e.g. a middleware receipt
    stamp: in the process whose drill steps the clock, from its own writes (a message
    received just before a step and handled just after must not be judged by the new
    clock: that made the drill's checker report chunks "ending in the past" which the
    robot had received in time); elsewhere, the shift now."""
    if not _written:
        return injected_shift_ns()
    i = bisect.bisect_right(_written, (system_ns, 1 << 62))
    return _written[max(i, 1) - 1][1]


def wall_ns() -> int:
    """Wall time, ns: the clock of every stamp the stack makes or judges."""
    return time.time_ns() + injected_shift_ns()


def wall_s() -> float:
    return wall_ns() * 1e-9


class WallClock:
    """Wall time for a monotonic instant, from the live offset; steps counted."""

    def __init__(self, step_bound_s: float = 0.02, wall=wall_ns, monotonic=time.monotonic):
        self.step_bound_s = step_bound_s
        self._wall = wall
        self._monotonic = monotonic
        self.steps = 0
        self.last_step_s = 0.0  # the latest step's size (wall moved by, beyond monotonic)
        self.last_step_at: float | None = None  # monotonic time it was noticed
        self._offset: float | None = None

    def offset(self) -> float:
        """``wall - monotonic`` now, s; a jump since the last read is a step. The wall
        read is bracketed by two monotonic reads (a thread preempted between them on a
        busy machine would otherwise look like a step of that long)."""
        for _ in range(3):
            m0 = self._monotonic()
            w = self._wall()
            m1 = self._monotonic()
            if m1 - m0 < 1e-3:
                break
        off = w * 1e-9 - (m0 + m1) / 2
        if self._offset is not None and abs(off - self._offset) > self.step_bound_s:
            self.steps += 1
            self.last_step_s = off - self._offset
            self.last_step_at = self._monotonic()
        self._offset = off
        return off

    def to_wall(self, monotonic_s: float) -> float:
        return monotonic_s + self.offset()

    def to_monotonic(self, wall_s: float) -> float:
        return wall_s - self.offset()

    def stepped_recently(self, within_s: float = 10.0) -> bool:
        return self.last_step_at is not None and self._monotonic() - self.last_step_at < within_s
