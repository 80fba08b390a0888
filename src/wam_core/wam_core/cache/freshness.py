"""The cache's freshness rule: how old an observation a reader may still act on.

A camera's representation is already one camera period old when the next frame lands,
and that frame then spends up to the world expert's encode budget before its
representation is cached. A TTL below period + budget turns ordinary encode jitter into
stale ticks, and a stale tick is not safer than a slightly older representation: it
executes open loop a chunk computed from an even older one. So ``repr_cache.ttl_ms:
auto`` (the default) is exactly that sum: the camera period, measured from the frames'
stamps (the configured rate until enough frames arrived), plus the world expert's
``timeout_ms``. An explicit number still wins.

The world expert resolves it per robot (each robot's camera has its own rate) and
announces it in every descriptor; an action expert set to ``auto`` adopts the announced
value. The drills judge a chunk stale by the same rule (``stale_bound_s``).
"""

from __future__ import annotations

import math
import statistics
from collections import deque

from ..common.params import AUTO

# What a reader set to auto uses until the first descriptor announces its robot's TTL:
# the shipped camera (30 Hz) and world budget (40 ms). A tick reads only what a
# descriptor pointed at, so in practice the announced value is the one that applies.
INITIAL_AUTO_TTL_MS = 1000.0 / 30.0 + 40.0

# The measured period counts up to this multiple of the configured one: a camera slower
# than half its rate is failing (the world expert's status says so), not a reason to act
# on older pictures.
MAX_PERIOD_FACTOR = 2.0


def is_auto(setting) -> bool:
    return setting == AUTO


def auto_ttl_ms(camera_period_ms: float, world_timeout_ms: float) -> float:
    """The rule: one camera period plus the world expert's encode budget."""
    return camera_period_ms + world_timeout_ms


def configured_ttl_ms(setting, camera_hz: float, world_timeout_ms: float) -> float:
    """The TTL a setting gives with the camera at its configured rate (what the drills
    and benches expect; the world expert refines the period from the stamps)."""
    if is_auto(setting):
        return auto_ttl_ms(1000.0 / camera_hz, world_timeout_ms)
    return float(setting)


def expected_ttl_ms(world, action) -> float:
    """The TTL an action expert's reads use (``world``, ``action``: the experts' parameter
    schemas), its camera at the configured rate: what drills and benches judge by."""
    setting = action.repr_cache.ttl_ms
    if not is_auto(setting):
        return float(setting)
    return configured_ttl_ms(world.repr_cache.ttl_ms, world.expected_camera_hz, world.timeout_ms)


def initial_ttl_ms(setting) -> float:
    """A reader's TTL before any descriptor announced one."""
    return INITIAL_AUTO_TTL_MS if is_auto(setting) else float(setting)


def stale_bound_s(ttl_ms: float, control_period_s: float) -> float:
    """How old a chunk's observation may be when it is published before the drills call
    it stale: the TTL, plus the one control period a read representation may wait for
    the next tick."""
    return ttl_ms / 1e3 + control_period_s


# How far the wall offset read for a chunk's stamp may wander from the read the cache
# judged an age by before it counts as a step: WallClock's own step bound. Below it are
# a preempted bracket read and drift; they move an age by less than the one control
# period the stale bound allows beyond the TTL.
CLOCK_READ_SLACK_MS = 20.0


def read_on_the_stamping_clock(
    obs_stamp_ns: int, tick_wall_s: float, read_age_ms: float, since_tick_ms: float
) -> bool:
    """Whether a chunk's stamp and the age its representation was judged by come from one
    wall clock. The cache judged the age at the read (``read_age_ms``), after the tick's
    deadline; the chunk's stamp converts that deadline with the offset read after the
    decode (``tick_wall_s``), ``since_tick_ms`` after it. On one clock the age at the tick
    lies between the read's age less the time since the tick and the read's age. A wall
    step in between moves it out by the step: forward, a 30 ms-old picture is 530 ms old
    on the clock the controller executes by; back, it dates from the future. Such a chunk
    would go out stamped by a clock its freshness was never judged on."""
    age_ms = tick_wall_s * 1e3 - obs_stamp_ns / 1e6
    low = read_age_ms - since_tick_ms - CLOCK_READ_SLACK_MS
    return low <= age_ms <= read_age_ms + CLOCK_READ_SLACK_MS


def valid_announced_ttl(ttl_ms: float) -> bool:
    """A descriptor's TTL an action expert adopts (the parameter's own range)."""
    return math.isfinite(ttl_ms) and 0.1 <= ttl_ms <= 60000.0


class CameraPeriod:
    """A camera's period from its frames' stamps: the median interval of the last
    ``window`` frames (a dropped frame or a burst barely moves it), the configured period
    until ``min_intervals`` intervals arrived, and never over ``MAX_PERIOD_FACTOR`` times
    the configured one. It moves only by more than ``STEP_MS``: a camera's timer jitter
    would otherwise re-announce the TTL by fractions of a millisecond with every frame,
    and the bound a chunk was judged by would differ from the one its status shows."""

    STEP_MS = 1.0

    def __init__(self, nominal_hz: float, window: int = 31, min_intervals: int = 5):
        if not nominal_hz > 0:
            raise ValueError(f'camera rate must be > 0 Hz, got {nominal_hz!r}')
        self.nominal_ms = 1000.0 / nominal_hz
        self.min_intervals = min_intervals
        self._intervals: deque[float] = deque(maxlen=window - 1)
        self._last_ns: int | None = None
        self._period_ms = self.nominal_ms

    def observe(self, stamp_ns: int) -> bool:
        """Take one frame's stamp; True when the period changed. A stamp not newer than
        the last (a repeat, an out-of-order frame) is ignored."""
        if self._last_ns is not None and stamp_ns <= self._last_ns:
            return False
        if self._last_ns is not None:
            self._intervals.append((stamp_ns - self._last_ns) / 1e6)
        self._last_ns = stamp_ns
        if len(self._intervals) < self.min_intervals:
            return False
        period = min(statistics.median(self._intervals), MAX_PERIOD_FACTOR * self.nominal_ms)
        if abs(period - self._period_ms) <= self.STEP_MS:
            return False
        self._period_ms = period
        return True

    @property
    def period_ms(self) -> float:
        return self._period_ms


class Freshness:
    """One robot's TTL: the setting (a number, or auto resolved against its camera)."""

    def __init__(self, setting, camera_hz: float, world_timeout_ms: float):
        self.auto = is_auto(setting)
        self.world_timeout_ms = world_timeout_ms
        self.camera = CameraPeriod(camera_hz)
        self._fixed = None if self.auto else float(setting)

    def observe(self, stamp_ns: int) -> None:
        """A frame of the robot's primary view arrived with this stamp."""
        if self.auto:
            self.camera.observe(stamp_ns)

    @property
    def ttl_ms(self) -> float:
        if self._fixed is not None:
            return self._fixed
        return auto_ttl_ms(self.camera.period_ms, self.world_timeout_ms)
