"""A canary's objectives: what a robot running a new release must keep, judged over a
watch window from the counters its typed statuses carry.

Each robot's window is the difference of two snapshots of its action expert's and its
gate's statuses (:class:`RobotSnapshot`), so the judgement never keeps a second set of
counters. A canary robot is held against absolute limits and against the robots that
keep the live release over the same window (their chunk rate: a canary that slows its
own robot down breaches even when every tick is a chunk). A joint that the live release
had parked at a limit when the canary started is not counted against the new one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RobotSnapshot:
    """One robot's counters at one moment (from its statuses)."""

    t: float  # monotonic s
    release: str
    ticks: int
    degraded_ticks: int
    held_ticks: int  # degraded ticks that sent a braking hold
    stale_ticks: int  # degraded ticks for want of a fresh representation
    mixed_version_ticks: int
    safety_stops: int
    forwarded_points: int  # (point, joint) commands the gate forwarded
    changed_points: int  # ... and changed by more than the tolerance
    at_limit_points: int  # ... and of revolute joints at (within 2 % of) a limit
    chunks: int
    seam_jump_rad: float  # the largest position jump at a chunk join (its window's max)
    # at_limit_points per joint, and the joints the latest forwarded chunk left at a limit
    at_limit_by_joint: dict[str, int] = field(default_factory=dict)
    parked: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RobotWindow:
    """One robot over a window: what the objectives judge."""

    release: str
    seconds: float
    ticks: int
    degraded_share: float
    held_ticks: int
    stale_ticks: int
    mixed_version_ticks: int
    safety_stops: int
    changed_share: float
    at_limit_share: float
    chunk_rate_hz: float
    seam_jump_rad: float
    not_counted: tuple[str, ...] = ()  # joints at a limit left out of at_limit_share

    @classmethod
    def between(
        cls, a: RobotSnapshot, b: RobotSnapshot, not_counted: frozenset[str] = frozenset()
    ) -> RobotWindow:
        """``not_counted``: joints whose commands at a limit are left out of the share
        (those the live release had parked there before a canary's switch)."""
        ticks = max(b.ticks - a.ticks, 0)
        points = max(b.forwarded_points - a.forwarded_points, 0)
        seconds = max(b.t - a.t, 1e-9)
        left_out = tuple(sorted(j for j in not_counted if j in b.at_limit_by_joint))
        at_limit = (b.at_limit_points - a.at_limit_points) - sum(
            b.at_limit_by_joint[j] - a.at_limit_by_joint.get(j, 0) for j in left_out
        )
        return cls(
            b.release,
            seconds,
            ticks,
            (b.degraded_ticks - a.degraded_ticks) / ticks if ticks else math.nan,
            b.held_ticks - a.held_ticks,
            b.stale_ticks - a.stale_ticks,
            b.mixed_version_ticks - a.mixed_version_ticks,
            b.safety_stops - a.safety_stops,
            (b.changed_points - a.changed_points) / points if points else 0.0,
            max(at_limit, 0) / points if points else 0.0,
            (b.chunks - a.chunks) / seconds,
            b.seam_jump_rad,
            left_out,
        )


@dataclass(frozen=True)
class Objectives:
    """What a canary robot must keep over its window (the defaults suit the shipped pair
    on this machine's fleet; a team sets its own in the release manager's parameters)."""

    max_degraded_share: float = 0.25  # whatever the cause
    max_degraded_excess: float = 0.05  # over the live robots' share in the same window
    # ... or this fraction of the live robots' share, if larger: on a loaded host two
    # robots' shares over a few seconds differ by about half of it without any release
    # (16.7 % against 23.5 % in an 8 s window, measured here on 2026-12-03)
    max_degraded_excess_ratio: float = 0.5
    max_held_ticks: int = 25  # 0.5 s of braking holds (or twice the live robots', if more)
    max_changed_share: float = 0.02  # the gate changed at most 2 % of the commands
    max_at_limit_share: float = 0.05  # revolute-joint commands parked at a limit
    max_safety_stops: int = 0
    max_mixed_version_ticks: int = 0
    max_seam_jump_rad: float = 0.10
    min_chunk_rate_ratio: float = 0.90  # of the live robots' rate over the same window


def breaches(
    canary: RobotWindow,
    objectives: Objectives,
    live_rate_hz: float | None = None,
    live_degraded_share: float | None = None,
    live_held_ticks: float | None = None,
) -> list[str]:
    """Every objective ``canary`` breached, as readable reasons ([] when within all).
    ``live_*``: the robots on the live release over the same window (degraded ticks and
    holds they have too, a loaded host's, are not held against the release)."""
    o, out = objectives, []
    if canary.ticks == 0:
        return ['no ticks in the window (the action expert is not serving)']
    if canary.degraded_share > o.max_degraded_share:
        out.append(f'degraded ticks {canary.degraded_share:.1%} > {o.max_degraded_share:.1%}')
    elif live_degraded_share is not None and canary.degraded_share - live_degraded_share > (
        allowed := max(o.max_degraded_excess, o.max_degraded_excess_ratio * live_degraded_share)
    ):
        out.append(
            f'degraded ticks {canary.degraded_share:.1%}, the live robots '
            f'{live_degraded_share:.1%} (> {allowed:.1%} more)'
        )
    if canary.at_limit_share > o.max_at_limit_share:
        out.append(
            f'joints at a limit in {canary.at_limit_share:.1%} of commands '
            f'> {o.max_at_limit_share:.1%}'
            + (
                f' (not counting {", ".join(canary.not_counted)}, parked there before)'
                if canary.not_counted
                else ''
            )
        )
    held_limit = max(o.max_held_ticks, 2.0 * (live_held_ticks or 0.0))
    if canary.held_ticks > held_limit:
        out.append(f'held ticks {canary.held_ticks} > {held_limit:g}')
    if canary.changed_share > o.max_changed_share:
        out.append(
            f'gate changed {canary.changed_share:.1%} of commands > {o.max_changed_share:.1%}'
        )
    if canary.safety_stops > o.max_safety_stops:
        out.append(f'safety stops {canary.safety_stops} > {o.max_safety_stops}')
    if canary.mixed_version_ticks > o.max_mixed_version_ticks:
        out.append(f'mixed-version ticks {canary.mixed_version_ticks}')
    if canary.seam_jump_rad > o.max_seam_jump_rad:
        out.append(f'seam jump {canary.seam_jump_rad:.3f} rad > {o.max_seam_jump_rad:.3f}')
    if live_rate_hz is not None and live_rate_hz > 0:
        ratio = canary.chunk_rate_hz / live_rate_hz
        if ratio < o.min_chunk_rate_ratio:
            out.append(
                f'chunk rate {canary.chunk_rate_hz:.1f} Hz is {ratio:.0%} of the live '
                f"robots' {live_rate_hz:.1f} Hz (< {o.min_chunk_rate_ratio:.0%})"
            )
    return out
