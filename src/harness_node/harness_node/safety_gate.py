"""The clamping gate and the safety stop: the only road from the action expert to the robot.

- Clamping gate: /action_expert/raw_chunk -> wam_core.control.limits.ClampGate ->
  /arm_controller/joint_trajectory. Wrong joints or any NaN/inf rejects a chunk whole.
  A safety net, not a smoother: the action expert's chunks are feasible by construction,
  and how much the gate still changes is reported as magnitudes per joint
  (``GateActivity``). Velocities are computed from the positions it forwards (never the
  sender's as they are).
- Safety stop: wam_core.control.safety.SafetyMonitor fed by /diagnostics levels, the
  experts' model versions (their typed statuses), raw-chunk arrivals, the forwarded
  chunks' horizons and a 100 Hz watchdog. A stop latches /safety/stop = true (transient
  local), sends a braking hold and refuses chunks until everything is OK for the
  hold-off, or /harness/reset (std_srvs/Trigger) is called while everything is OK.

Every callback here is in the gate's own callback group and does bounded work. The task
manager is another node, in another process (``harness_node.task_node``): it asks for a
hold through ``harness/hold`` (std_srvs/Trigger), never by calling into the gate.
"""

from __future__ import annotations

import threading
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from wam_core.common.clock import WallClock, wall_ns, wall_s
from wam_core.common.config import HarnessParams
from wam_core.common.robot import robot_of_namespace
from wam_core.common.status import ERROR, OK, WARN
from wam_core.control.command_tracker import CommandTracker
from wam_core.control.joint_state import JointStateError, JointStateMapper
from wam_core.control.limits import ChunkRejected, ClampGate, GateActivity
from wam_core.control.safety import SafetyMonitor, late_chunk
from wam_core.control.trajectory import Trajectory, braking_point, point_velocities
from wam_core.serving.latency import LatencyWindow, RateMeter
from wam_interfaces.msg import (
    ActionExpertStatus,
    GateJointActivity,
    SafetyGateStatus,
    WorldExpertStatus,
)
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.quiet_log import QuietLog
from wam_util.status import TypedStatus

# a revolute joint's command this close to a limit (share of its range) is "at the limit"
AT_LIMIT_FRACTION = 0.02


class SafetyGate:
    def __init__(self, node, cfg: HarnessParams, diagnostics: NodeDiagnostics):
        self.node = node
        # rejected inputs and chunks: the first at once, then one line a second per reason
        self.quiet = QuietLog(node.get_logger())
        self.joint_names = list(cfg.robot.joint_names)
        self.period_s = cfg.control.period_s
        self.clamp = ClampGate(
            self.joint_names,
            cfg.joint_limits,
            self.period_s,
            contact_noise=cfg.control.contact_noise_fraction,
        )
        robot = cfg.robot.description()  # the tolerances of this robot's joints (prismatic: m)
        self.activity = GateActivity(
            self.joint_names, [robot.change_tolerance(j) for j in self.joint_names]
        )
        self.clock = WallClock()  # wall stamps <-> monotonic deadlines, by the live offset
        # the gate's baseline: the command the robot follows
        self.tracker = CommandTracker(cfg.control.max_command_deviation)
        # the command tracker is only touched under this lock (an executor with several
        # threads may run the hold service beside a chunk)
        self._command_lock = threading.Lock()
        self.monitor = SafetyMonitor(cfg.safety, time.monotonic(), node.get_namespace())
        self.joints = JointStateMapper(self.joint_names)
        self.current = None
        self.forwarded = 0
        # the largest position jump at a chunk join: over the run, and since the last report
        self.seam_jump_max = 0.0
        self._seam_jump_window = 0.0
        self.release = ''  # the release the action expert serves (its status)
        # forwarded commands of revolute joints within AT_LIMIT_FRACTION of their range
        # from a limit: what a policy that drives a joint to its stop shows (the action
        # expert bounds chunks inside the limits, so the clamp stays idle); a gripper at
        # the end of its travel is normal and not counted
        revolute = np.array([j not in robot.prismatic for j in self.joint_names])
        margin = AT_LIMIT_FRACTION * (self.clamp.upper - self.clamp.lower)
        self._near_lower = np.where(revolute, self.clamp.lower + margin, -np.inf)
        self._near_upper = np.where(revolute, self.clamp.upper - margin, np.inf)
        self.commands_at_limit = 0
        self.at_limit_by_joint = np.zeros(len(self.joint_names), dtype=np.int64)
        # per joint: does the latest forwarded chunk end at a limit (named in the status)
        self._ends_at_limit = np.zeros(len(self.joint_names), dtype=bool)
        self.robot = robot_of_namespace(node.get_namespace())
        self.refused_while_stopped = 0
        self.rejected_inputs: dict[str, int] = {}
        self.clamp_ms = LatencyWindow()
        self.stop_latency_ms = LatencyWindow()  # trigger (diagnostic / timeout) -> hold sent
        self._chunk_rate = RateMeter()
        self._out_rate = RateMeter()
        group = self.callback_group = MutuallyExclusiveCallbackGroup()
        self._stop_pub = node.create_publisher(Bool, 'safety/stop', qos.LATCHED)
        self._out = node.create_publisher(
            JointTrajectory, 'arm_controller/joint_trajectory', qos.EVENTS
        )
        sub = node.create_subscription
        sub(
            JointTrajectory,
            'action_expert/raw_chunk',
            self._on_chunk,
            qos.EVENTS,
            callback_group=group,
        )
        sub(JointState, 'joint_states', self._on_joint_state, qos.SENSOR, callback_group=group)
        sub(
            DiagnosticArray,
            '/diagnostics',
            self._on_diagnostics,
            cfg.safety.diagnostics_queue_depth,
            callback_group=group,
        )
        sub(
            WorldExpertStatus,
            'world_expert/status',
            self._on_world_status,
            qos.EVENTS,
            callback_group=group,
        )
        sub(
            ActionExpertStatus,
            'action_expert/status',
            self._on_action_status,
            qos.EVENTS,
            callback_group=group,
        )
        node.create_service(Trigger, 'harness/reset', self._on_reset, callback_group=group)
        node.create_service(Trigger, 'harness/hold', self._on_hold, callback_group=group)
        node.create_timer(cfg.safety.watchdog_period_s, self._watchdog, callback_group=group)
        self.status = TypedStatus(
            node, diagnostics, 'safety gate', SafetyGateStatus, '~/gate_status', self._status
        )
        self._publish_stop(True)  # the monitor starts stopped
        node.get_logger().info(f'safety: {self.monitor.reason}')

    # the robot's commands -------------------------------------------------------------
    def hold(self) -> None:
        """Brake from the command being followed to rest within the acceleration limits (or
        hold where the robot is, when it follows none), inside the position limits (a
        measured gripper at -1e-5 m is contact noise, and nothing outside the limits ever
        goes to the robot)."""
        if self.current is None:
            return
        with self._command_lock:
            now_s = wall_s()
            base, vel = self.tracker.baseline(now_s, self.current)
            v = np.zeros_like(base) if vel is None else vel
            point, duration = braking_point(base, v, self.clamp.amax, self.period_s)
            point = np.clip(point, self.clamp.lower, self.clamp.upper).reshape(1, -1)
            hold = Trajectory(0.0, np.array([duration]), point, np.zeros_like(point))
            self._out.publish(convert.timed_trajectory(self.joint_names, hold))  # 0: "now"
            self.tracker.record(now_s, hold.times, point, hold.velocities, (base, vel))

    # inputs ---------------------------------------------------------------------------
    def _reject_input(self, what: str, exc: Exception) -> None:
        self.rejected_inputs[what] = self.rejected_inputs.get(what, 0) + 1
        self.quiet.warning(f'rejected {what}', f'rejected {what}: {exc}')

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            self.current = self.joints.map(msg.name, msg.position).astype(float)
        except JointStateError as exc:
            self._reject_input('joint_state', exc)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        t0 = time.perf_counter()
        now = time.monotonic()
        for st in msg.status:
            self.monitor.on_status(
                st.name, convert.status_level(st), st.message, now, st.hardware_id
            )
        self._sync_stop(t0)

    def _on_world_status(self, msg: WorldExpertStatus) -> None:
        t0 = time.perf_counter()
        # a fleet's world expert encodes each robot with its own release (a canary): this
        # robot's version, where the status lists the robots
        version = next(
            (r.model_version for r in msg.per_robot if r.robot == self.robot and r.model_version),
            msg.model_version,
        )
        self.monitor.on_versions(time.monotonic(), world=version)
        self._sync_stop(t0)

    def _on_action_status(self, msg: ActionExpertStatus) -> None:
        t0 = time.perf_counter()
        self.release = msg.release
        self.monitor.on_versions(
            time.monotonic(),
            accepted=msg.world_version_accepted,
            also_accepted=tuple(msg.world_versions_loaded),
        )
        self._sync_stop(t0)

    def _on_chunk(self, msg: JointTrajectory) -> None:
        now = time.monotonic()
        self._chunk_rate.tick(now)
        self.monitor.on_chunk(now)
        if self.monitor.stopped:
            self.refused_while_stopped += 1
            return
        if self.current is None:
            self._reject_input('raw_chunk', ValueError('no joint state yet'))
            return
        t0 = time.perf_counter()
        with self._command_lock:
            self._forward(msg, now, t0)

    def _forward(self, msg: JointTrajectory, now: float, t0: float) -> None:
        """Clamp ``msg`` against the command being followed and forward it (under the lock)."""
        try:
            times = convert.trajectory_times(msg)
            # The baseline is the command being followed, not the measured state: measured
            # velocity at a joint limit is contact noise and would reject every chunk.
            stamp_ns = convert.stamp_to_ns(msg.header.stamp)
            start_s = (stamp_ns or wall_ns()) * 1e-9  # 0 means "now", as for the controller
            base, vel = self.tracker.baseline(start_s, self.current)
            asked = convert.trajectory_positions(msg)
            res = self.clamp.apply(msg.joint_names, asked, times, base, vel)
            velocities = None
            if convert.trajectory_velocities(msg) is not None:
                # The sender's velocities are never forwarded as they are (a NaN, a moving
                # last point or velocities at odds with the positions would reach the
                # controller): the gate computes them from what it forwards, as the action
                # expert does, so for a chunk it did not change they come out the same.
                # Point 0 continues the command's velocity, or without one (the baseline
                # is the measured position) the first segment's: a chunk that moves at
                # once, recorded as starting from rest, ran its first segment's cubic up
                # to 1.3 times the velocity it was bounded to, and the next chunk, bounded
                # from there, was refused as infeasible (instance_kill, 2026-12-07).
                velocities = point_velocities(res.times, res.positions, vel)
        except ChunkRejected as exc:
            self.quiet.warning(f'chunk {exc.reason}', f'rejected chunk: {exc}')
            return
        except ValueError as exc:  # ragged point lists and the like
            self.clamp.rejected['shape'] = self.clamp.rejected.get('shape', 0) + 1
            self.quiet.warning('chunk shape', f'rejected chunk: {exc}')
            return
        self.activity.add(res.change)
        out = JointTrajectory()
        out.header = msg.header
        out.joint_names = list(self.joint_names)
        out.points = msg.points[:0]
        for i, (p, src) in enumerate(zip(res.positions, msg.points, strict=True)):
            q = type(src)()
            q.positions = p.tolist()
            if velocities is not None:
                q.velocities = velocities[i].tolist()
            q.time_from_start = src.time_from_start
            out.points.append(q)
        # Lateness is judged with the clock read just before the publish, after the clamp:
        # a busy process can stall between any two lines, and a check made before the
        # clamp once let through a chunk whose end had passed by the time it was sent
        # (a fresh-clone CI run: "ends in the past", 31.9 ms).
        late = late_chunk(
            stamp_ns,
            times[-1] if times else 0.0,
            wall_ns(),
            max_late_s=self.monitor.cfg.chunk_hold_s,
            min_ahead_s=self.period_s,
        )
        if late is not None:
            # a busy executor delivered it late: stale (a 300 ms chunk whose point 0
            # is at most chunk_hold_s late still has half its horizon ahead), or so
            # close to its end that the controller could reject it as ending in the
            # past (less than a period left); the horizon rule holds the robot
            self.clamp.rejected['late'] = self.clamp.rejected.get('late', 0) + 1
            self.quiet.warning('chunk late', f'rejected chunk: late ({late})')
            return
        # the join: this chunk's first point against the command it replaces, at its start
        jump = float(np.max(np.abs(res.positions[0] - base))) if len(res.positions) else 0.0
        self.seam_jump_max = max(self.seam_jump_max, jump)
        at_limit = (res.positions <= self._near_lower) | (res.positions >= self._near_upper)
        per_joint = np.count_nonzero(at_limit, axis=0)
        self.at_limit_by_joint += per_joint
        self.commands_at_limit += int(per_joint.sum())
        if len(at_limit):
            self._ends_at_limit = at_limit[-1]
        self._seam_jump_window = max(self._seam_jump_window, jump)
        self.tracker.record(start_s, times, res.positions, velocities, (base, vel))
        self.clamp_ms.add((time.perf_counter() - t0) * 1e3)
        self._out.publish(out)
        self._out_rate.tick(now)
        # the robot runs out of this command at its last point: a gap from then on
        self.monitor.on_forwarded(self.clock.to_monotonic(start_s + times[-1]))
        self.forwarded += 1

    # the stop ---------------------------------------------------------------------------
    def _watchdog(self) -> None:
        t0 = time.perf_counter()
        now = time.monotonic()
        self.clock.offset()  # a wall-clock step is noticed within a watchdog period
        if self.monitor.gap_hold_due(now):  # the action expert went quiet: hold before the stop
            self.hold()
            self.node.get_logger().warning(
                f'holding: no action chunk for {(now - self.monitor.last_chunk) * 1e3:.0f} ms '
                'or the last one ran out',
                throttle_duration_sec=1.0,
            )
        self.monitor.evaluate(now)
        self._sync_stop(t0)

    def _sync_stop(self, t0: float) -> None:
        """Act on the monitor's decision, whichever input changed it."""
        if self.monitor.stopped and not self._published_stop:
            self._publish_stop(True)
            self.hold()
            self.stop_latency_ms.add((time.perf_counter() - t0) * 1e3)
            self.node.get_logger().error(f'SAFETY STOP: {self.monitor.reason}')
        elif not self.monitor.stopped and self._published_stop:
            self.node.get_logger().info('safety stop cleared: everything OK for the hold-off')
            self._publish_stop(False)

    def _publish_stop(self, value: bool) -> None:
        self._stop_pub.publish(Bool(data=value))
        self._published_stop = value

    def _on_reset(self, request, response):
        ok, message = self.monitor.reset(time.monotonic())
        if ok:
            self._publish_stop(False)
        response.success, response.message = ok, message
        self.node.get_logger().info(f'reset requested: {message}')
        return response

    def _on_hold(self, request, response):
        """A hold asked for from outside (the task manager, on a canceled task)."""
        response.success = self.current is not None
        if response.success:
            self.hold()
            response.message = 'holding'
        else:
            response.message = 'no joint state yet: nothing to hold'
        self.node.get_logger().info(f'hold requested: {response.message}')
        return response

    def _take_seam_window(self) -> float:
        jump, self._seam_jump_window = self._seam_jump_window, 0.0
        return jump

    def _status(self) -> SafetyGateStatus:
        now = time.monotonic()
        stopped = self.monitor.stopped
        level, message = OK, 'forwarding clamped chunks'
        if stopped:
            level, message = ERROR, f'safety stop: {self.monitor.reason}'
        elif self.clock.stepped_recently():
            level, message = (
                WARN,
                f'the wall clock stepped by {self.clock.last_step_s * 1e3:+.0f} ms (chunks '
                'are judged by the new one)',
            )
        return SafetyGateStatus(
            level=level,
            message=message,
            stopped=stopped,
            stop_reason=self.monitor.reason,
            safety_stops=self.monitor.stops,
            gap_holds=self.monitor.gap_holds,
            forwarded_chunks=self.forwarded,
            clamped_points=self.clamp.clamped_points,
            rejected_chunks=sum(self.clamp.rejected.values()),
            refused_while_stopped=self.refused_while_stopped,
            raw_chunk_rate_hz=self._chunk_rate.rate(now),
            expected_chunk_hz=1.0 / self.period_s,
            forward_rate_hz=self._out_rate.rate(now),
            rejected_chunk_reasons=convert.reason_counts(self.clamp.rejected),
            rejected_inputs=convert.reason_counts(self.rejected_inputs),
            clock_steps=self.clock.steps,
            last_clock_step_ms=self.clock.last_step_s * 1e3,
            latency=[
                convert.latency_stats('clamp', self.clamp_ms.summary()),
                convert.latency_stats('stop', self.stop_latency_ms.summary()),
            ],
            changed_share=self.activity.overall_share(),
            release=self.release,
            forwarded_commands=self.activity.points * len(self.joint_names),
            changed_commands=int(np.sum(self.activity.changed)),
            seam_jump_window=self._take_seam_window(),
            seam_jump_max=self.seam_jump_max,
            commands_at_limit=self.commands_at_limit,
            joints_at_limit=[
                j for j, x in zip(self.joint_names, self._ends_at_limit, strict=True) if x
            ],
            gate_activity=[
                GateJointActivity(
                    joint=j,
                    tolerance=float(tol),
                    changed_share=a['changed_share'],
                    change_p50=a['p50'],
                    change_p99=a['p99'],
                    change_max=a['max'],
                    commands_at_limit=int(n),
                )
                for (j, a), tol, n in zip(
                    self.activity.summary().items(),
                    self.activity.tolerances,
                    self.at_limit_by_joint,
                    strict=True,
                )
            ],
        )
