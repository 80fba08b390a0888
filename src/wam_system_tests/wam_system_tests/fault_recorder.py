"""What every fault drill shares (the lone robot's, ``lone_faults``, and the fleet's,
``fleet_faults``): the targets, a fault's result and the recorder that measures it.

For each fault a recorder on /arm_controller/joint_trajectory (what the robot receives)
measures:
- hold_ms: fault -> the robot holding its last valid action: the point where the last
  full chunk sent before the fault cleared applies (its stamp; the action expert stamps
  a chunk one control period after its tick), or a safety stop, whichever is first. From
  then on the robot executes that chunk open loop and then brakes (hold_last_action);
- brake_ms: fault -> the first braking hold (a one-point trajectory) or stop after it;
  brake_by: who sent it: the action expert (hold_last_action: the gate forwarded a
  one-point raw chunk published up to ``RAW_HOLD_WINDOW_S`` before), the gate itself
  (a gap, its horizon run out) or the safety stop. Both holds go out stamped 0, "now";
- unsafe: forwarded points that break a joint limit (must be 0);
- stale: full chunks forwarded around the fault (from 0.5 s before it to the end of the
  drill) with no representation of the accepted model version observed (a descriptor, or
  an entry in the shm ring the action expert reads) within TTL + one control period
  before the chunk's tick (its stamp less the stamp lead the action
  expert reported then), i.e. actions from a stale, missing or wrong-version
  representation (must be 0);
- conformance: forwarded trajectories joint_trajectory_controller would reject (must be 0);
- recovery_s: the fault cleared (for a restart: the stamp of its first new output) -> the
  next full chunk forwarded (target <= 2 s);
"""

from __future__ import annotations

import bisect
import glob
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rclpy.subscription import MessageInfo
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from wam_core.cache.freshness import expected_ttl_ms, stale_bound_s, valid_announced_ttl
from wam_core.common.clock import WallClock, shift_at
from wam_core.common.config import ActionExpertParams, HarnessParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import resolve_path
from wam_core.control.conformance import ConformanceCounter, ControllerRules, violations
from wam_core.control.limits import ClampGate, trajectory_violations
from wam_core.models.manifest import read_manifest
from wam_interfaces.msg import ActionExpertStatus, RepresentationDescriptor
from wam_util import convert, qos

# The hold target: a fault's robot holds its last valid action within the stale bound,
# TTL + one control period (``freshness.stale_bound_s``): 70 ms at a 50 ms TTL, 93 ms at
# ttl_ms auto with a 30 Hz camera. Each result carries the bound its recorder judged by.
DEFAULT_HOLD_TARGET_MS = 70.0
RECOVERY_TARGET_S = 2.0
TAKEOVER_TARGET_MS = 200.0  # instance_kill: a dead instance's robots ticked again within
# a forwarded hold is the action expert's when one of its raw holds was published this
# long before it (the gate forwards within milliseconds; its own holds come after 150 ms
# without a chunk)
RAW_HOLD_WINDOW_S = 0.1


@dataclass
class FaultResult:
    fault: str
    hold_ms: float | None
    unsafe: int
    stale: int
    recovery_s: float | None
    ok: bool = False
    notes: str = ''
    brake_ms: float | None = None
    brake_by: str | None = None  # 'gate', 'action expert' or 'stop' (see the module's doc)
    conformance: int = 0
    clear_s: float | None = None  # when the fault cleared, seconds after it began
    # [t - t_fault, 0 hold | 1 chunk | 2 stop]
    timeline: list[list[float]] = field(default_factory=list)
    hold_target_ms: float = DEFAULT_HOLD_TARGET_MS  # the stale bound (TTL + one period)
    # instance_kill: the dead instance's robots' first chunk from their standby, ms after
    # the kill (the worst robot); None for the other faults
    takeover_ms: float | None = None
    # a fleet drill: a robot the fault must not touch lost chunk rate or was stopped
    disturbed: bool = False
    # instance_kill: safety stops of any robot from the kill to the end of the handback
    # (a takeover or handback within the gate's chunk timeout must not stop a robot)
    safety_stops: int = 0

    def judge(self, needs_reset: bool = False) -> FaultResult:
        # a takeover faster than the gate's gap hold leaves nothing to brake for
        braked = self.brake_ms is not None or (
            self.takeover_ms is not None and self.takeover_ms <= TAKEOVER_TARGET_MS
        )
        self.ok = (
            self.unsafe == 0
            and self.stale == 0
            and self.conformance == 0
            and self.hold_ms is not None
            and self.hold_ms <= self.hold_target_ms
            and braked  # the robot did brake or stop
            and self.recovery_s is not None
            and (needs_reset or self.recovery_s <= RECOVERY_TARGET_S)
            and (self.takeover_ms is None or self.takeover_ms <= TAKEOVER_TARGET_MS)
            and not self.disturbed
            and self.safety_stops == 0
        )
        return self


class Recorder:
    """What the robot receives, with arrival times (monotonic s), checked against the limits."""

    def __init__(
        self,
        stack,
        accepted_version,
        max_age_s: float,
        limits: ClampGate,
        period_s: float = 0.02,
        node=None,
        namespace: str = '',
    ):
        """``node``/``namespace``: a fleet's robot (its monitor, '/robot1'); by default the
        lone robot of ``stack``."""
        self.limits = limits  # the configured joint limits, the yardstick
        self.accepted_version, self.max_age_ns = accepted_version, int(max_age_s * 1e9)
        # several, for a drill that switches releases: a representation of any of them is
        # fresh (which model decoded it is the action expert's mixed-version count)
        self.accepted_versions = (
            {accepted_version} if isinstance(accepted_version, str) else set(accepted_version)
        )
        # a chunk's stamp is when it applies, one period after its tick (at least)
        self.period_ns = int(period_s * 1e9)
        self.rules = ControllerRules(list(limits.joint_names))
        self.conformance = ConformanceCounter()  # since the last result
        self.conformance_all = ConformanceCounter()
        self.conformance_examples: list[str] = []
        self.in_flight_across_step = 0  # chunks sent before an injected step, received after
        self.wall_clock = WallClock()  # stamps <-> this process's monotonic time, live
        self.forwarded: list[tuple] = []  # (t, points, header stamp ns)
        # When the stack produced them, on this clock (from their stamps): a fault clears
        # at its first new output, and chunks computed from that output must not count as
        # sent before it merely because this process received the output later.
        self.raw: list[float] = []  # full raw chunks' stamps
        # one-point raw chunks (the action expert's holds): when each was published, and
        # when each forwarded hold was, by arrival time (wall-clock ns, the middleware's)
        self.raw_holds: list[int] = []
        self.forwarded_hold_sent: dict[float, int] = {}
        self.observations: list[float] = []  # representations' observation stamps
        self.descriptors: list[tuple] = []  # (arrival t, model_version)
        self.fresh_obs_ns: list[int] = []  # observation stamps of accepted-version representations
        # (observation stamp ns, TTL ms) each descriptor announced: the TTL an auto reader
        # applies follows the camera's measured period, and a chunk is judged by the one
        # in force, not by the configured rate's (issue 26: the same rule in the drills)
        self.announced_ttl: list[tuple[int, float]] = []
        self.stops: list[tuple] = []  # (t, stopped)
        self.unsafe = 0
        node = node or stack.monitor
        self._ring_node = node
        self._ring = None  # the shm ring, once watch_cache is called
        ns = namespace.rstrip('/')
        node.create_subscription(
            JointTrajectory, f'{ns}/arm_controller/joint_trajectory', self._on_forwarded, 100
        )
        node.create_subscription(
            JointTrajectory,
            f'{ns}/action_expert/raw_chunk',
            self._on_raw,
            100,
        )
        # the lead the action expert stamps chunks with, as it changes (its status)
        self.leads: list[tuple[float, int]] = []
        node.create_subscription(
            ActionExpertStatus,
            f'{ns}/action_expert/status',
            lambda m: self.leads.append((time.monotonic(), int(m.stamp_lead_periods))),
            qos.EVENTS,
        )
        node.create_subscription(
            RepresentationDescriptor,
            f'{ns}/world_expert/representation',
            self._on_descriptor,
            100,
        )
        node.create_subscription(
            Bool,
            f'{ns}/safety/stop',
            lambda m: self.stops.append((time.monotonic(), m.data)),
            qos.LATCHED,
        )

    def _on_raw(self, m: JointTrajectory, info: MessageInfo) -> None:
        if len(m.points) > 1:  # (a braking hold is stamped 0, "from now")
            self.raw.append(self._monotonic(m.header.stamp) - self.period_ns * 1e-9)
        else:
            bisect.insort(self.raw_holds, info['source_timestamp'] or time.time_ns())

    def hold_sender(self, t: float) -> str:
        """Who sent the one-point trajectory forwarded at ``t`` (its arrival): the action
        expert when one of its holds was published within ``RAW_HOLD_WINDOW_S`` before the
        gate published this one, else the gate. Judged by the publishers' times, not this
        process's callbacks: a busy drill process took the raw hold up to 5 ms after the
        forwarded one, and counted by arrival a few of the action expert's as the gate's."""
        sent = self.forwarded_hold_sent.get(t)
        if sent is None:
            return 'gate'
        k = bisect.bisect_left(self.raw_holds, sent - int(RAW_HOLD_WINDOW_S * 1e9))
        near = k < len(self.raw_holds) and self.raw_holds[k] <= sent
        return 'action expert' if near else 'gate'

    def first_computed_after(self, since: int, t_fault: float) -> float | None:
        """The first full chunk among ``raw[since:]`` computed after ``t_fault``
        (monotonic s), by its stamp; None if none yet. A node stamps ``lead`` periods past
        its tick, so a node killed at ``t_fault`` may have sent chunks stamped up to that
        lead later (they counted as the survivor's before 2026-12-04): only a stamp past
        it proves a survivor's chunk."""
        after = t_fault + (self.lead_periods(t_fault) - 1) * self.period_ns * 1e-9
        return next((t for t in self.raw[since:] if t > after), None)

    def _monotonic(self, stamp) -> float:
        return self.wall_clock.to_monotonic(convert.stamp_to_ns(stamp) * 1e-9)

    def _on_descriptor(self, msg) -> None:
        self.descriptors.append((time.monotonic(), msg.model_version))
        self.observations.append(self._monotonic(msg.header.stamp))
        if msg.model_version in self.accepted_versions:
            bisect.insort(self.fresh_obs_ns, convert.stamp_to_ns(msg.header.stamp))
        if valid_announced_ttl(msg.ttl_ms):
            bisect.insort(self.announced_ttl, (convert.stamp_to_ns(msg.header.stamp), msg.ttl_ms))

    def max_age_at(self, tick_ns: int) -> int:
        """The stale bound (ns) for a chunk ticked at ``tick_ns``: the TTL the newest
        descriptor stamped by then announced, plus one period; the configured bound before
        any announced one."""
        i = bisect.bisect_right(self.announced_ttl, (tick_ns, math.inf))
        if i == 0:
            return self.max_age_ns
        return int(self.announced_ttl[i - 1][1] * 1e6) + self.period_ns

    def watch_cache(self, segment: str, every_s: float = 0.2) -> None:
        """Also learn accepted-version observations from the shared-memory ring itself,
        which is what the action expert reads. A restarted world expert's first
        descriptors are lost to this recorder until DDS has matched the new publisher,
        while the action expert already serves them from the ring (``cache.latest``):
        judged by descriptors alone, a chunk computed from such a fresh representation
        looked stale. The ring holds the observation stamps the TTL rule applies to."""
        from wam_core.cache.shm import ShmRingReader

        self._ring = ShmRingReader(segment, ttl_ms=1e15)  # every entry: ages are judged here
        self._ring_seen: set[int] = set()
        self._ring_node.create_timer(every_s, self._scan_ring)

    def _scan_ring(self) -> None:
        ring = self._ring
        ring.latest(self.accepted_version)  # (re)attaches to a ring its writer recreated
        for slot in range(ring.capacity):
            res = ring.read(slot, self.accepted_version)
            if res.ok and res.entry.stamp_ns not in self._ring_seen:
                self._ring_seen.add(res.entry.stamp_ns)
                bisect.insort(self.fresh_obs_ns, res.entry.stamp_ns)
            del res  # drop the view into the ring before the next slot (or a re-attach)

    def lead_periods(self, t: float) -> int:
        """The action expert's stamp lead (periods between a tick and its chunk's stamp)
        in force at ``t`` (this clock), from its status; 1 before the first status."""
        i = bisect.bisect_right(self.leads, (t, 1 << 30))
        return self.leads[i - 1][1] if i else 1

    def stale(self, stamp_ns: int, arrived: float | None = None) -> bool:
        """No accepted-version observation within max_age before the chunk's tick: its
        stamp less the lead the action expert stamped it with (a smaller lead would only
        make the representation look older)."""
        lead = 1 if arrived is None else self.lead_periods(arrived)
        tick_ns = stamp_ns - lead * self.period_ns
        i = bisect.bisect_right(self.fresh_obs_ns, tick_ns)
        return i == 0 or tick_ns - self.fresh_obs_ns[i - 1] > self.max_age_at(tick_ns)

    def stale_detail(self, stamp_ns: int, arrived: float, t_fault: float) -> str:
        """Why a chunk was judged stale, for the drill's notes: when it arrived, the lead
        it was judged with, and the age of the newest observation before its tick."""
        lead = self.lead_periods(arrived)
        tick_ns = stamp_ns - lead * self.period_ns
        i = bisect.bisect_right(self.fresh_obs_ns, tick_ns)
        age = 'none' if i == 0 else f'{(tick_ns - self.fresh_obs_ns[i - 1]) / 1e6:.1f} ms'
        after = self.fresh_obs_ns[i] - tick_ns if i < len(self.fresh_obs_ns) else None
        nxt = '' if after is None else f', next {after / 1e6:.1f} ms after the tick'
        return (
            f'chunk at {(arrived - t_fault) * 1e3:+.0f} ms (lead {lead}): newest observation '
            f'{age} old at its tick{nxt} (bound {self.max_age_at(tick_ns) / 1e6:.1f} ms)'
        )

    def _on_forwarded(self, msg, info: MessageInfo) -> None:
        t = time.monotonic()
        bad = trajectory_violations(
            self.limits,
            msg.joint_names,
            convert.trajectory_positions(msg),
            convert.trajectory_times(msg),
        )
        self.unsafe += int(bool(bad))
        stamp_ns = convert.stamp_to_ns(msg.header.stamp)
        # Judged at the middleware's receipt, not this callback's, on the clock the stack
        # saw when the gate published it (a drill's injected wall-clock step included). A
        # chunk in flight while the drill stepped the clock forward was valid when sent
        # and ends "in the past" on the new clock: a race of the step with the transit
        # that no sender can avoid (a real controller rejects that chunk and goes on with
        # the last one). Those are counted apart, not as the stack's violations.
        received = info['received_timestamp']
        sent = info['source_timestamp'] or received
        if shift_at(sent) != shift_at(received):
            self.in_flight_across_step += 1
        problems = violations(
            self.rules,
            msg.joint_names,
            convert.conformance_points(msg),
            stamp_ns,
            received + shift_at(sent),
        )
        self.conformance.add(problems)
        self.conformance_all.add(problems)
        if problems and len(self.conformance_examples) < 5:
            self.conformance_examples.append('; '.join(problems))
        self.forwarded.append((t, len(msg.points), stamp_ns))
        if len(msg.points) == 1:
            self.forwarded_hold_sent[t] = sent

    def cleared_after_restart(self, events: list, n: int, t_restart: float) -> float | None:
        """When a restarted node's fault cleared: its first new output (``events[n]``,
        the stack's clock), or the tick of the first full chunk forwarded after the
        restart if earlier (this process may match a restarted publisher later than the
        stack does)."""
        t_clear = events[n] if len(events) > n else None
        period = self.period_ns * 1e-9
        after = [
            self.wall_clock.to_monotonic(stamp * 1e-9) - period
            for t, k, stamp in self.forwarded
            if k > 1 and t >= t_restart
        ]
        if after and (t_clear is None or after[0] < t_clear):
            t_clear = after[0]
        return t_clear

    def stopped_at(self, t: float) -> bool:
        before = [s for ts, s in self.stops if ts <= t]
        return bool(before and before[-1])

    def result(
        self,
        name: str,
        t_fault: float,
        t_clear: float | None,
        t_end: float,
        since: float | None = None,
    ) -> FaultResult:
        """``since``: where the chunks judged (stale, the timeline) begin, 0.5 s before the
        fault unless a drill's earlier part already judged those (monotonic s)."""
        t_from = t_fault - 0.5 if since is None else since
        if self._ring is not None:  # the ring's newest entries, whose descriptors may be queued
            self._scan_ring()
        # The robot holds its last valid action from where the last full chunk sent before
        # the fault cleared applies (its stamp: the stack's clock, not this process's, which
        # also runs the simulated robot), and brakes at the first one-point hold or stop
        # after it (arrival times: the harness stamps its holds "now").
        until = t_clear if t_clear is not None else t_end
        applies = [
            (self.wall_clock.to_monotonic(stamp * 1e-9), t, n) for t, n, stamp in self.forwarded
        ]
        # chunks ticked before the fault cleared (a 1 ms margin: the first chunk of a
        # restarted expert is the clearing event itself, on the same stamp)
        tick = self.period_ns * 1e-9
        full = [(a, t) for a, t, n in applies if n > 1 and a - tick < until - 1e-3]
        last_full = max([a for a, _ in full], default=t_fault)
        last_arrival = max([t for a, t in full if a == last_full], default=t_fault)
        holds = [t for _, t, n in applies if t >= last_arrival and n == 1]
        stops = [t for t, s in self.stops if t >= t_fault and s]
        first_stop = stops[0] if stops else None
        held = max(last_full, t_fault) if first_stop is None else min(last_full, first_stop)
        braked = min(holds[:1] + stops[:1]) if (holds or stops) else None
        brake_by = None
        if braked is not None:
            brake_by = self.hold_sender(braked) if holds and holds[0] == braked else 'stop'
        notes = ''
        if self.stopped_at(t_fault):  # e.g. a restart outlived the silence timeout
            held = braked = t_fault
            notes = 'the robot was already safety-stopped when the fault began'
        cleared = [t for t, s in self.stops if not s and t_clear is not None and t >= t_clear]
        if cleared:
            notes += (
                f'{"; " if notes else ""}safety stop cleared '
                f'{cleared[0] - t_clear:.2f} s after the fault cleared'
            )
        stale_chunks = [
            (t, stamp)
            for t, n, stamp in self.forwarded
            if t_from <= t <= t_end and n > 1 and self.stale(stamp, t)
        ]
        stale = len(stale_chunks)
        if stale_chunks:
            notes += f'{"; " if notes else ""}stale: ' + ', '.join(
                self.stale_detail(stamp, t, t_fault) for t, stamp in stale_chunks[:3]
            )
        after = [t for t, n, _ in self.forwarded if t_clear is not None and t >= t_clear and n > 1]
        timeline = [
            [round(t - t_fault, 4), 0 if n == 1 else 1]
            for t, n, _ in self.forwarded
            if t_from <= t <= t_end
        ]
        timeline += [
            [round(t - t_fault, 4), 2] for t, s in self.stops if s and t_from <= t <= t_end
        ]
        unsafe, self.unsafe = self.unsafe, 0
        conformance, self.conformance = self.conformance.total, ConformanceCounter()
        if self.in_flight_across_step:
            notes += (
                f'{"; " if notes else ""}{self.in_flight_across_step} chunk(s) in flight '
                'across the clock step (judged by the clock they were sent by)'
            )
            self.in_flight_across_step = 0
        return FaultResult(
            name,
            max(0.0, (held - t_fault) * 1e3),
            unsafe,
            stale,
            None if not after else after[0] - t_clear,
            notes=notes,
            clear_s=None if t_clear is None else t_clear - t_fault,
            timeline=sorted(timeline),
            brake_ms=None if braked is None else (braked - t_fault) * 1e3,
            brake_by=brake_by,
            conformance=conformance,
            hold_target_ms=self.max_age_ns / 1e6,
        )


def _wait(stack, cond: Callable[[], bool], timeout: float) -> float | None:
    stack.spin_for(timeout, until=cond)
    return time.monotonic() if cond() else None


def _chunk_after(stack, rec: Recorder, t_clear: float | None, timeout: float = 10.0) -> None:
    """Spin until the robot gets a full chunk again after the fault cleared."""
    _wait(
        stack,
        lambda: (
            t_clear is not None and any(t >= t_clear and k > 1 for t, k, _ in rec.forwarded[-50:])
        ),
        timeout,
    )


def accepted_version_and_max_age(config: str, camera_hz: float | None = None) -> tuple:
    """The world-model version the action expert accepts, and the age past which a
    published chunk is stale (``freshness.stale_bound_s``: TTL + one control period, s);
    ``camera_hz``: the cameras' rate where a drill sets its own."""
    world = load_params(config, 'world_expert', WorldExpertParams)
    if camera_hz is not None:
        world.expected_camera_hz = camera_hz
    action = load_params(config, 'action_expert', ActionExpertParams)
    return (
        read_manifest(resolve_path(world.model_dir)).version,
        stale_bound_s(expected_ttl_ms(world, action), action.control.period_s),
    )


def configured_limits(config: str) -> ClampGate:
    """A clamping gate with the limits the harness is configured with (the yardstick)."""
    h = load_params(config, 'harness', HarnessParams)
    return ClampGate(h.robot.joint_names, h.joint_limits, h.control.period_s)


def shm_segments() -> list[str]:
    """Our representation cache's segments and any Fast DDS transport segment."""
    return sorted(glob.glob('/dev/shm/wam*') + glob.glob('/dev/shm/fastdds_*'))


def _line(r: FaultResult) -> str:
    def rounded(v, n):
        return None if v is None else round(v, n)

    return (
        f'{r.fault:18} hold {rounded(r.hold_ms, 1)} ms (target {r.hold_target_ms:.0f}, brake '
        f'{rounded(r.brake_ms, 1)}{" by " + r.brake_by if r.brake_by else ""}) | '
        f'unsafe {r.unsafe} | stale {r.stale} | conformance {r.conformance} | '
        f'recovery {rounded(r.recovery_s, 2)} s | {"ok" if r.ok else "MISSED"}'
        + ('' if r.ok or not r.notes else f' ({r.notes})')
    )


def _percentile(values: list, q: float) -> float | None:
    import numpy as np

    vals = [v for v in values if v is not None]
    return float(np.percentile(vals, q)) if vals else None


def summarise(results: list[FaultResult]) -> dict[str, dict]:
    """Per fault over its runs: stale and unsafe forwarded (sums), hold, brake and
    recovery p50/p99, runs missed (a missing hold or recovery counts as missed)."""
    out: dict[str, dict] = {}
    for name in dict.fromkeys(r.fault for r in results):
        runs = [r for r in results if r.fault == name]
        out[name] = {
            'runs': len(runs),
            'stale_forwarded': sum(r.stale for r in runs),
            'unsafe_forwarded': sum(r.unsafe for r in runs),
            'conformance_violations': sum(r.conformance for r in runs),
            'hold_ms_p50': _percentile([r.hold_ms for r in runs], 50),
            'hold_ms_p99': _percentile([r.hold_ms for r in runs], 99),
            'hold_target_ms': max(r.hold_target_ms for r in runs),
            'brake_ms_p50': _percentile([r.brake_ms for r in runs], 50),
            'brake_ms_p99': _percentile([r.brake_ms for r in runs], 99),
            'brakes_by': {
                by: sum(1 for r in runs if r.brake_by == by)
                for by in ('gate', 'action expert', 'stop')
            },
            'recovery_s_p50': _percentile([r.recovery_s for r in runs], 50),
            'recovery_s_p99': _percentile([r.recovery_s for r in runs], 99),
            'missing_hold_or_recovery': sum(
                1 for r in runs if r.hold_ms is None or r.recovery_s is None
            ),
            'runs_missed': sum(1 for r in runs if not r.ok),
            'ok': all(r.ok for r in runs),
        }
        takeovers = [r.takeover_ms for r in runs if r.takeover_ms is not None]
        if takeovers or name == 'instance_kill':
            out[name]['takeover_ms'] = _percentile(takeovers, 99)
            out[name]['takeover_ms_p50'] = _percentile(takeovers, 50)
            out[name]['takeover_target_ms'] = TAKEOVER_TARGET_MS
            out[name]['safety_stops'] = sum(r.safety_stops for r in runs)
    return out
