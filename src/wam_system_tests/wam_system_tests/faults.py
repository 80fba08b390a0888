"""`make faults`: inject faults into the multi-process stack on the simulator and measure.

    python -m wam_system_tests.faults [--only world_kill,camera_stall] [--repeat N]
                                      [--json out.json]

For each fault a recorder on /arm_controller/joint_trajectory (what the robot receives)
measures:
- hold_ms: fault -> the robot holding its last valid action: the point where the last
  full chunk sent before the fault cleared applies (its stamp; the action expert stamps
  a chunk one control period after its tick), or a safety stop, whichever is first. From
  then on the robot executes that chunk open loop and then brakes (hold_last_action);
- brake_ms: fault -> the first braking hold (a one-point trajectory) or stop after it;
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
- leaked segments and processes once the stack is shut down (checked by the caller).
"""

from __future__ import annotations

import argparse
import bisect
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from rclpy.action import ActionClient
from rclpy.subscription import MessageInfo
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from robot_agent.stack import Stack, override
from wam_core.cache.freshness import expected_ttl_ms, stale_bound_s
from wam_core.common.clock import SHIFT_ENV, WallClock, injected_shift_ns, write_shift
from wam_core.common.config import ActionExpertParams, HarnessParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, resolve_path, workspace_root
from wam_core.control.conformance import ConformanceCounter, ControllerRules, violations
from wam_core.control.limits import ClampGate, trajectory_violations
from wam_core.models.manifest import read_manifest, write_manifest
from wam_interfaces.action import ExecuteTask
from wam_interfaces.msg import ActionExpertStatus, RepresentationDescriptor
from wam_util import convert, qos

from .report import read_report, record_conformance, update_report_part

# The hold target: a fault's robot holds its last valid action within the stale bound,
# TTL + one control period (``freshness.stale_bound_s``): 70 ms at a 50 ms TTL, 93 ms at
# ttl_ms auto with a 30 Hz camera. Each result carries the bound its recorder judged by.
DEFAULT_HOLD_TARGET_MS = 70.0
RECOVERY_TARGET_S = 2.0
TAKEOVER_TARGET_MS = 200.0  # instance_kill: a dead instance's robots ticked again within


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
    conformance: int = 0
    clear_s: float | None = None  # when the fault cleared, seconds after it began
    # [t - t_fault, 0 hold | 1 chunk | 2 stop]
    timeline: list[list[float]] = field(default_factory=list)
    hold_target_ms: float = DEFAULT_HOLD_TARGET_MS  # the stale bound (TTL + one period)
    # instance_kill: the dead instance's robots' first chunk from their standby, ms after
    # the kill (the worst robot); None for the other faults
    takeover_ms: float | None = None

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
        self.wall_clock = WallClock()  # stamps <-> this process's monotonic time, live
        self.forwarded: list[tuple] = []  # (t, points, header stamp ns)
        # When the stack produced them, on this clock (from their stamps): a fault clears
        # at its first new output, and chunks computed from that output must not count as
        # sent before it merely because this process received the output later.
        self.raw: list[float] = []  # full raw chunks' stamps
        self.observations: list[float] = []  # representations' observation stamps
        self.descriptors: list[tuple] = []  # (arrival t, model_version)
        self.fresh_obs_ns: list[int] = []  # observation stamps of accepted-version representations
        self.stops: list[tuple] = []  # (t, stopped)
        self.unsafe = 0
        node = node or stack.monitor
        self._ring_node = node
        ns = namespace.rstrip('/')
        node.create_subscription(
            JointTrajectory, f'{ns}/arm_controller/joint_trajectory', self._on_forwarded, 100
        )
        node.create_subscription(
            JointTrajectory,
            f'{ns}/action_expert/raw_chunk',
            lambda m: (
                len(m.points) > 1
                and self.raw.append(self._monotonic(m.header.stamp) - self.period_ns * 1e-9)
            ),
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

    def _monotonic(self, stamp) -> float:
        return self.wall_clock.to_monotonic(convert.stamp_to_ns(stamp) * 1e-9)

    def _on_descriptor(self, msg) -> None:
        self.descriptors.append((time.monotonic(), msg.model_version))
        self.observations.append(self._monotonic(msg.header.stamp))
        if msg.model_version in self.accepted_versions:
            bisect.insort(self.fresh_obs_ns, convert.stamp_to_ns(msg.header.stamp))

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
        return i == 0 or tick_ns - self.fresh_obs_ns[i - 1] > self.max_age_ns

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
        problems = violations(
            self.rules,
            msg.joint_names,
            convert.conformance_points(msg),
            stamp_ns,
            # the middleware's receipt, not this callback's (on the clock the robot sees:
            # a drill's injected wall-clock step included)
            info['received_timestamp'] + injected_shift_ns(),
        )
        self.conformance.add(problems)
        self.conformance_all.add(problems)
        if problems and len(self.conformance_examples) < 5:
            self.conformance_examples.append('; '.join(problems))
        self.forwarded.append((t, len(msg.points), stamp_ns))

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
        self, name: str, t_fault: float, t_clear: float | None, t_end: float
    ) -> FaultResult:
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
        stale = sum(
            1
            for t, n, stamp in self.forwarded
            if t_fault - 0.5 <= t <= t_end and n > 1 and self.stale(stamp, t)
        )
        after = [t for t, n, _ in self.forwarded if t_clear is not None and t >= t_clear and n > 1]
        timeline = [
            [round(t - t_fault, 4), 0 if n == 1 else 1]
            for t, n, _ in self.forwarded
            if t_fault - 0.5 <= t <= t_end
        ]
        timeline += [
            [round(t - t_fault, 4), 2] for t, s in self.stops if s and t_fault - 0.5 <= t <= t_end
        ]
        unsafe, self.unsafe = self.unsafe, 0
        conformance, self.conformance = self.conformance.total, ConformanceCounter()
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
            conformance=conformance,
            hold_target_ms=self.max_age_ns / 1e6,
        )


def _wait(stack, cond: Callable[[], bool], timeout: float) -> float | None:
    stack.spin_for(timeout, until=cond)
    return time.monotonic() if cond() else None


def _serving(stack, rec: Recorder, timeout: float = 30.0) -> None:
    n = len(rec.forwarded)
    ok = _wait(stack, lambda: sum(1 for _, k, _ in rec.forwarded[n:] if k > 1) > 25, timeout)
    if ok is None:
        raise RuntimeError('the stack is not forwarding chunks before the fault')


def _chunk_after(stack, rec: Recorder, t_clear: float | None, timeout: float = 10.0) -> None:
    """Spin until the robot gets a full chunk again after the fault cleared."""
    _wait(
        stack,
        lambda: (
            t_clear is not None and any(t >= t_clear and k > 1 for t, k, _ in rec.forwarded[-50:])
        ),
        timeout,
    )


def _kill_and_restart(stack, rec: Recorder, role: str, events: list) -> tuple:
    """kill -9 one node, restart it after 1 s; the fault clears at its first new output in
    ``events`` (when the stack produced it, not when this process received it)."""
    _serving(stack, rec)
    t_fault = time.monotonic()
    dead = stack.kill_child(role, reap=False)  # keep spinning: the recorder times the robot's view
    stack.spin_for(1.0)
    dead.wait(timeout=10)
    stack.start_child(role)
    t_restart = time.monotonic()
    n = len(events)
    _wait(stack, lambda: len(events) > n, 60.0)
    t_clear = rec.cleared_after_restart(events, n, t_restart)
    _chunk_after(stack, rec, t_clear)
    return t_fault, t_clear


def fault_world_kill(stack, rec: Recorder) -> FaultResult:
    """kill -9 of the world expert, then a restart (cleared: the new writer publishes)."""
    t_fault, t_clear = _kill_and_restart(stack, rec, 'world', rec.observations)
    return rec.result('world_kill', t_fault, t_clear, time.monotonic()).judge()


def fault_action_kill(stack, rec: Recorder) -> FaultResult:
    """kill -9 of the action expert, then a restart (cleared: the new expert ticks)."""
    t_fault, t_clear = _kill_and_restart(stack, rec, 'action', rec.raw)
    return rec.result('action_kill', t_fault, t_clear, time.monotonic()).judge()


def _robot_fault(
    stack, rec: Recorder, name: str, attr: str, value, normal, seconds: float = 1.0
) -> FaultResult:
    """Set one fault switch of the simulated robot for ``seconds``, then clear it."""
    t_fault = time.monotonic()
    setattr(stack.robot, attr, value)
    stack.spin_for(seconds)
    setattr(stack.robot, attr, normal)
    t_clear = time.monotonic()
    _chunk_after(stack, rec, t_clear)
    return rec.result(name, t_fault, t_clear, time.monotonic()).judge()


def fault_camera_stall(stack, rec: Recorder) -> FaultResult:
    """The camera stops publishing, then comes back."""
    _serving(stack, rec)
    return _robot_fault(stack, rec, 'camera_stall', 'camera_paused', True, False)


def fault_version_mismatch(stack, rec: Recorder) -> FaultResult:
    """The world expert restarts with a model of another version; recovery is a restart with the
    right one plus /harness/reset (a version change never clears by itself)."""
    _serving(stack, rec)
    src = resolve_path(load_params(stack.config, 'world_expert', WorldExpertParams).model_dir)
    tmp = tempfile.mkdtemp(prefix='wam_other_world_')
    try:
        other = os.path.join(tmp, 'world_expert')

        def other_version() -> None:
            shutil.copytree(src, other)
            man = read_manifest(src)
            os.remove(os.path.join(other, 'manifest.json'))
            write_manifest(other, man.name, man.version + '-other', dict(man.extra))

        # Copying and hashing the weights takes about a second: off this thread, so the
        # recorder keeps taking trajectories as they arrive (a stalled recorder would
        # see them late and count them as ending in the past).
        worker = threading.Thread(target=other_version, name='other_version')
        worker.start()
        while worker.is_alive():
            stack.spin_for(0.05)
        worker.join()
        _stop_spinning(stack, 'world')
        stack.spin_for(0.2)
        stack.start_child('world', override('world_expert', 'model_dir', other))
        n = len(rec.descriptors)
        t_fault = _wait(
            stack, lambda: any(v.endswith('-other') for _, v in rec.descriptors[n:]), 60.0
        )
        if t_fault is None:
            raise RuntimeError('the other-version world expert never published')
        # the first descriptor of the other version is the fault
        t_fault = next(t for t, v in rec.descriptors[n:] if v.endswith('-other'))
        stack.spin_for(1.0)
        _stop_spinning(stack, 'world')
        stack.spin_for(0.2)
        stack.start_child('world')
        n = len(rec.descriptors)
        t_clear = _wait(
            stack, lambda: any(not v.endswith('-other') for _, v in rec.descriptors[n:]), 60.0
        )
        _reset_harness(stack)
        _chunk_after(stack, rec, t_clear)
        return rec.result('version_mismatch', t_fault, t_clear, time.monotonic()).judge(
            needs_reset=True
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _stop_spinning(stack, role: str, timeout: float = 10.0) -> None:
    """SIGINT one node process and wait for its exit while spinning: a blocking wait (a
    shutting-down expert takes about a second) would leave the recorder to take the
    trajectories forwarded meanwhile a second late, as if they had ended in the past."""
    proc = stack.kill_child(role, signal.SIGINT, reap=False)
    stack.spin_for(timeout, until=lambda: proc.poll() is not None)
    proc.wait(timeout=1.0)


def _monitor_entity(stack, key: str, make):
    """A publisher or client on the monitor node, made once per stack and never destroyed
    while the stack runs: the monitor is spun on another thread (the observers), and
    destroying an entity under a spinning executor can end that thread (rclpy's
    InvalidHandle: it did, after 14 rounds of ``make faults REPEAT=20``)."""
    made = stack.__dict__.setdefault('_fault_entities', {})
    if key not in made:
        made[key] = make()
    return made[key]


def _reset_harness(stack) -> None:
    cli = _monitor_entity(
        stack, 'reset', lambda: stack.monitor.create_client(Trigger, '/harness/reset')
    )
    # wait while spinning: a blocking wait_for_service would stall the recorder (trajectories
    # taken a second late look as if they ended in the past)
    stack.spin_for(5.0, until=cli.service_is_ready)
    if cli.service_is_ready():
        for _ in range(20):  # the reset is refused until everything reports OK again
            fut = cli.call_async(Trigger.Request())
            stack.spin_for(2.0, until=fut.done)
            if fut.done() and fut.result().success:
                break
            stack.spin_for(0.25)


def _moving(stack, rec: Recorder, seed: int) -> None:
    """A fresh scene: the policy moves the arm (a frozen camera only matters while it moves)."""
    stack.robot.sim.reset(seed)
    _serving(stack, rec)
    stack.spin_for(0.3)


def fault_frozen_frame(stack, rec: Recorder) -> FaultResult:
    """The camera publishes the same frame forever (new stamps, same pixels) while the arm
    moves."""
    _moving(stack, rec, 5101)
    return _robot_fault(stack, rec, 'frozen_frame', 'camera_frozen', True, False)


def _clock_jump(stack, rec: Recorder, name: str, offset_s: float) -> FaultResult:
    _serving(stack, rec)
    return _robot_fault(stack, rec, name, 'clock_offset_s', offset_s, 0.0)


def fault_clock_future(stack, rec: Recorder) -> FaultResult:
    """The robot's clock jumps 5 s ahead: its camera stamps come from the future."""
    return _clock_jump(stack, rec, 'clock_future', 5.0)


def fault_clock_past(stack, rec: Recorder) -> FaultResult:
    """The robot's clock jumps 5 s back: its camera stamps are already old."""
    return _clock_jump(stack, rec, 'clock_past', -5.0)


CLOCK_STEP_S = 0.5


def fault_clock_step(stack, rec: Recorder) -> FaultResult:
    """The wall clock every process of the stack reads steps 500 ms forward, runs 1.5 s,
    then steps back (an NTP correction, a resumed VM), through the injected time source
    (``WAM_CLOCK_SHIFT_FILE``): the machine's own clock is never touched. Chunks are
    stamped and judged by the live clock, a representation dated across the step is
    refused until a new frame is encoded (a few tens of ms), and nothing must hold the
    robot longer than that."""
    path = os.environ.get(SHIFT_ENV)
    if not path:
        raise RuntimeError(f'the clock_step drill needs the stack started with {SHIFT_ENV}')
    _serving(stack, rec)
    parts = []
    for step_ns in (int(CLOCK_STEP_S * 1e9), 0):
        t_step = time.monotonic()
        write_shift(path, step_ns)
        _chunk_after(stack, rec, t_step)
        stack.spin_for(max(0.0, t_step + 1.5 - time.monotonic()))
        parts.append(rec.result('clock_step', t_step, t_step, time.monotonic()))
    fwd, back = parts
    res = FaultResult(
        'clock_step',
        None if None in (fwd.hold_ms, back.hold_ms) else max(fwd.hold_ms, back.hold_ms),
        fwd.unsafe + back.unsafe,
        fwd.stale + back.stale,
        None
        if None in (fwd.recovery_s, back.recovery_s)
        else max(fwd.recovery_s, back.recovery_s),
        notes=f'+{CLOCK_STEP_S * 1e3:.0f} ms: hold {fwd.hold_ms} ms, recovery '
        f'{fwd.recovery_s} s; -{CLOCK_STEP_S * 1e3:.0f} ms: hold {back.hold_ms} ms, recovery '
        f'{back.recovery_s} s',
        brake_ms=fwd.brake_ms,
        conformance=fwd.conformance + back.conformance,
        timeline=fwd.timeline + back.timeline,
        hold_target_ms=fwd.hold_target_ms,
    )
    # (no braking is expected: chunks resume within the open-loop budget)
    res.ok = (
        res.unsafe == 0
        and res.stale == 0
        and res.conformance == 0
        and res.hold_ms is not None
        and res.hold_ms <= res.hold_target_ms
        and res.recovery_s is not None
        and res.recovery_s <= RECOVERY_TARGET_S
    )
    return res


def _no_interruption(
    stack,
    rec: Recorder,
    name: str,
    action: Callable[[], float | None],
    within_s: float,
    window_s: float = 2.0,
) -> FaultResult:
    """Faults away from the control path (planner, instruction input): the robot must not
    notice. hold_ms is 0 when nothing interrupted the chunks; recovery_s is how long the
    task path took to answer (a fallback plan, a drained flood). "Not noticing" is judged
    against the same stack just before the fault: the full-chunk rate over at least
    ``window_s`` must stay within 25 % of the rate over the ``window_s`` before it."""
    _serving(stack, rec)
    stack.spin_for(max(0.0, window_s - 0.5))  # a full baseline window of serving
    t_fault = time.monotonic()
    answered = action()
    stack.spin_for(max(0.0, t_fault + window_s - time.monotonic()))
    t_end = time.monotonic()
    res = rec.result(name, t_fault, t_fault, t_end)

    def rate(t0: float, t1: float) -> float:
        return sum(1 for t, k, _ in rec.forwarded if t0 <= t <= t1 and k > 1) / max(t1 - t0, 1e-9)

    during, before = rate(t_fault, t_end), rate(t_fault - window_s, t_fault)
    stops = [t for t, v in rec.stops if t_fault <= t <= t_end and v]
    res.hold_ms = 0.0
    res.recovery_s = None if answered is None else answered - t_fault
    res.notes = (
        f'{during:.1f} full chunks/s forwarded during the fault against {before:.1f} before it, '
        f'{len(stops)} safety stops'
    )
    res.ok = (
        res.unsafe == 0
        and res.stale == 0
        and res.conformance == 0
        and not stops
        and during >= 0.75 * before
        and res.recovery_s is not None
        and res.recovery_s <= within_s
    )
    return res


def _goal(stack, instruction: str, timeout: float) -> float | None:
    """Send an ExecuteTask goal; the time its plan arrived (first feedback with a plan), or
    None."""
    client = _monitor_entity(
        stack,
        'execute_task',
        lambda: ActionClient(stack.monitor, ExecuteTask, '/harness/execute_task'),
    )
    client.wait_for_server(timeout_sec=10.0)  # at once, once the server is known
    planned = []
    fut = client.send_goal_async(
        ExecuteTask.Goal(instruction=instruction),
        feedback_callback=lambda fb: (
            fb.feedback.plan and not planned and planned.append(time.monotonic())
        ),
    )
    stack.spin_for(
        timeout, until=lambda: bool(planned) or (fut.done() and not fut.result().accepted)
    )
    if fut.done() and fut.result().accepted:
        done = fut.result().cancel_goal_async()
        stack.spin_for(3.0, until=done.done)
    return planned[0] if planned else None


LLM_BREAKER_COOLDOWN_S = 2.0  # the drill's circuit-breaker cool-down (30 s by default)
LLM_FALLBACK_REASON = {'down': 'http_5xx', 'slow': 'timeout', 'garbage': 'invalid_json'}


def _llm_fallbacks(stack) -> dict[str, int]:
    """The task manager's LLM fallbacks by reason, from its latest typed status."""
    task = stack.monitor.task
    return convert.counts_of(task.llm_fallbacks) if task is not None else {}


def _llm_fault(mode: str) -> Callable:
    def fault(stack, rec: Recorder) -> FaultResult:
        # each mode must reach the server: wait out a breaker opened by the previous mode
        stack.spin_for(LLM_BREAKER_COOLDOWN_S + 0.5)
        stack.llm_server.mode = mode
        reason = LLM_FALLBACK_REASON[mode]
        before = _llm_fallbacks(stack).get(reason, 0)
        # timeout 2 s x (1 + 2 retries) within a 4 s deadline, then the rules
        res = _no_interruption(
            stack,
            rec,
            f'llm_{mode}',
            lambda: _goal(stack, 'put the red apple in the fridge', 15.0),
            within_s=6.0,
        )
        stack.spin_for(2.5)  # the harness publishes diagnostics at 1 Hz
        seen = _llm_fallbacks(stack).get(reason, 0) - before
        res.notes += f'; fallbacks for {reason}: +{seen:g}'
        res.ok = res.ok and seen >= 1
        return res

    fault.__doc__ = (
        f'The LLM server is {mode}: plans fall back to the rules; control never notices.'
    )
    return fault


def fault_instruction_flood(stack, rec: Recorder, count: int = 2000) -> FaultResult:
    """A flood of /instruction messages: the harness plans one task at a time and refuses the
    rest."""
    pub = _monitor_entity(
        stack, 'instruction', lambda: stack.monitor.create_publisher(String, '/instruction', 100)
    )

    def flood() -> float | None:
        for i in range(count):
            pub.publish(String(data=f'put the red apple in the fridge #{i}'))
            if i % 100 == 0:
                stack.spin_for(0.01)
        stack.spin_for(1.0)
        return time.monotonic()

    return _no_interruption(stack, rec, 'instruction_flood', flood, within_s=10.0)


FAULTS = {
    'world_kill': fault_world_kill,
    'action_kill': fault_action_kill,
    'camera_stall': fault_camera_stall,
    'frozen_frame': fault_frozen_frame,
    'version_mismatch': fault_version_mismatch,
    'llm_down': _llm_fault('down'),
    'llm_slow': _llm_fault('slow'),
    'llm_garbage': _llm_fault('garbage'),
    'instruction_flood': fault_instruction_flood,
    'clock_future': fault_clock_future,
    'clock_past': fault_clock_past,
    'clock_step': fault_clock_step,
}


class FakeLLMServer:
    """An OpenAI-compatible endpoint that misbehaves on demand: 'down' (connection refused
    is simulated by a 503 without a body), 'slow' (answers after 10 s) or 'garbage' (a
    well-formed reply whose content is not JSON)."""

    def __init__(self):
        import http.server
        import threading

        self.mode = 'down'
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                try:
                    self._answer()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the planner gave up waiting ('slow'): expected

            def _answer(self):
                self.rfile.read(int(self.headers.get('Content-Length', 0) or 0))
                if server.mode == 'slow':
                    time.sleep(10.0)
                if server.mode == 'down':
                    self.send_response(503)
                    self.end_headers()
                    return
                # a well-formed chat reply whose answer is not a plan (random bytes, hex)
                body = json.dumps(
                    {'choices': [{'message': {'content': '<<not json>> ' + os.urandom(48).hex()}}]}
                ).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f'http://127.0.0.1:{self.httpd.server_address[1]}/v1'
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


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


def run(
    faults: list[str],
    seed: int = 5000,
    progress: bool = True,
    shm_name: str = '',
    repeat: int = 1,
) -> dict[str, object]:
    """The lone robot's faults on the multi-process stack on the simulator, then the
    fleet's (``fleet_faults``) on a fleet of two robots; one result for both."""
    from .fleet_faults import FLEET_FAULTS, run_fleet

    lone = [f for f in faults if f in FAULTS]
    fleet = [f for f in faults if f in FLEET_FAULTS]
    out = _run_lone(lone, seed, progress, shm_name, repeat) if lone else _empty()
    if fleet:

        def show(i, r):
            if progress:
                print(f'{f"[{i + 1}/{repeat}] " if repeat > 1 else ""}{_line(r)}', flush=True)

        f = run_fleet(fleet, repeat, progress=show)
        results = [FaultResult(**r) for r in out['faults']] + f['results']
        out.update(
            faults=[asdict(r) for r in results],
            summary=summarise(results),
            conformance_checked=out['conformance_checked'] + f['conformance_checked'],
            conformance_violations=out['conformance_violations'] + f['conformance_violations'],
            conformance_examples=out['conformance_examples'] + f['conformance_examples'],
            leaked_segments=out['leaked_segments'] + f['leaked_segments'],
            leaked_processes=out['leaked_processes'] + f['leaked_processes'],
        )
        out['all_ok'] = (
            all(r.ok for r in results)
            and not out['leaked_segments']
            and not out['leaked_processes']
        )
    return out


def _empty() -> dict[str, object]:
    return {
        'faults': [],
        'summary': {},
        'conformance_checked': 0,
        'conformance_violations': 0,
        'conformance_examples': [],
        'leaked_segments': [],
        'leaked_processes': [],
        'all_ok': True,
    }


def _run_lone(
    faults: list[str], seed: int, progress: bool, shm_name: str, repeat: int
) -> dict[str, object]:
    import psutil

    config = default_config()
    before = set(shm_segments())
    # the wall clock the stack's processes (and this one) read: a drill may step it
    shift_dir = tempfile.mkdtemp(prefix='wam_clock_')
    shift_path = os.path.join(shift_dir, 'shift_ns')
    write_shift(shift_path, 0)
    previous_shift = os.environ.get(SHIFT_ENV)
    os.environ[SHIFT_ENV] = shift_path
    llm = FakeLLMServer()
    extra = override('task_manager', 'planner.llm_url', llm.url)
    extra += override('task_manager', 'planner.breaker_cooldown_s', LLM_BREAKER_COOLDOWN_S)
    extra += ['-p', f'repr_cache.shm_name:={shm_name}'] if shm_name else []
    stack = Stack('multi', config, robot='sim', seed=seed, extra_args=extra)
    stack.llm_server = llm
    results: list[FaultResult] = []
    pids = set()
    rec = None
    try:
        stack.wait_ready(120)
        stack.spin_for(
            3.0, until=lambda: stack.monitor.forwarded > 0 and not stack.monitor.safety_stop
        )
        period = load_params(config, 'action_expert', ActionExpertParams).control.period_s
        rec = Recorder(
            stack, *accepted_version_and_max_age(config), configured_limits(config), period
        )
        action = load_params(config, 'action_expert', ActionExpertParams)
        rec.watch_cache(shm_name or action.repr_cache.shm_name)
        for i in range(repeat):
            for name in faults:
                r = FAULTS[name](stack, rec)
                results.append(r)
                pids |= {p.pid for p in stack.procs}
                if progress:
                    print(f'{f"[{i + 1}/{repeat}] " if repeat > 1 else ""}{_line(r)}', flush=True)
                stack.spin_for(1.0)
    finally:
        pids |= {p.pid for p in stack.procs}
        stack.shutdown()
        llm.close()
        if previous_shift is None:
            os.environ.pop(SHIFT_ENV, None)
        else:
            os.environ[SHIFT_ENV] = previous_shift
        shutil.rmtree(shift_dir, ignore_errors=True)
    time.sleep(0.5)
    leaked_segments = sorted(set(shm_segments()) - before)
    leaked_procs = sorted(
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != 'zombie'
    )
    return {
        'faults': [asdict(r) for r in results],
        'summary': summarise(results),
        'conformance_checked': rec.conformance_all.checked if rec else 0,
        'conformance_violations': rec.conformance_all.total if rec else 0,
        'conformance_examples': rec.conformance_examples if rec else [],
        'leaked_segments': leaked_segments,
        'leaked_processes': leaked_procs,
        'all_ok': all(r.ok for r in results) and not leaked_segments and not leaked_procs,
    }


def _line(r: FaultResult) -> str:
    def rounded(v, n):
        return None if v is None else round(v, n)

    return (
        f'{r.fault:18} hold {rounded(r.hold_ms, 1)} ms (target {r.hold_target_ms:.0f}, brake '
        f'{rounded(r.brake_ms, 1)}) | '
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
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    from .fleet_faults import FLEET_FAULTS

    ap.add_argument('--only', default=','.join([*FAULTS, *FLEET_FAULTS]))
    ap.add_argument('--repeat', type=int, default=1, help='run every fault this many times')
    ap.add_argument('--json', default='')
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(',') if n.strip()]
    unknown = [n for n in names if n not in FAULTS and n not in FLEET_FAULTS]
    if unknown:
        ap.error(f'unknown faults {unknown}; known: {", ".join([*FAULTS, *FLEET_FAULTS])}')
    if args.repeat < 1:
        ap.error('--repeat must be at least 1')
    out = run(names, repeat=args.repeat)
    leaks = len(out['leaked_segments']) + len(out['leaked_processes'])
    summary = out['summary']
    for figures in summary.values():
        figures['leaks'] = leaks
    # each fault's figures are from its latest run: --only reruns keep the others'
    previous = read_report().get('reliability', {}).get('faults', {})
    kept = {k: v for k, v in previous.items() if k not in summary and 'runs' in v}
    update_report_part('reliability', 'faults', {**kept, **summary})
    record_conformance('faults', out['conformance_checked'], out['conformance_violations'])
    timeline = os.path.join(workspace_root(), 'bench', 'faults_timeline.json')
    with open(timeline, 'w', encoding='utf-8') as fh:
        json.dump(out, fh)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as fh:
            json.dump(out, fh, indent=1)
    print()
    print(
        f'{"fault":18}{"runs":>5}{"stale":>6}{"unsafe":>7}{"hold p50/p99 ms":>18}'
        f'{"brake p99 ms":>13}{"recovery p50/p99 s":>20}{"missed":>7}'
    )

    def fmt(v, n=1):
        return '-' if v is None else f'{v:.{n}f}'

    for name, f in summary.items():
        print(
            f'{name:18}{f["runs"]:>5}{f["stale_forwarded"]:>6}{f["unsafe_forwarded"]:>7}'
            f'{fmt(f["hold_ms_p50"]) + " / " + fmt(f["hold_ms_p99"]):>18}'
            f'{fmt(f["brake_ms_p99"]):>13}'
            f'{fmt(f["recovery_s_p50"], 2) + " / " + fmt(f["recovery_s_p99"], 2):>20}'
            f'{f["runs_missed"]:>7}'
        )
    print(
        f'conformance: {out["conformance_violations"]} violations in '
        f'{out["conformance_checked"]} forwarded trajectories {out["conformance_examples"][:2]}'
    )
    print(f'leaked segments {out["leaked_segments"]} processes {out["leaked_processes"]}')
    print(
        'all faults handled within targets'
        if out['all_ok']
        else 'SOME FAULTS MISSED THEIR TARGETS'
    )
    return 0 if out['all_ok'] else 1


if __name__ == '__main__':
    sys.exit(main())
