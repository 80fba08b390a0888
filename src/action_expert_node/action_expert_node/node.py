"""Action expert: a 50 Hz timer -> cache read -> action expert -> raw JointTrajectory.

A managed (lifecycle) node. configure: read the parameters, verify the manifest, load
the model, attach to the cache; activate: warm up, start the timer; deactivate: stop
the timer and publish a hold. Each tick never waits for the world expert: it uses the
newest representation that passes the version, TTL and seqlock checks, or holds. Its
typed status goes to ~/status with every /diagnostics report.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from wam_core.cache.factory import open_cache_reader
from wam_core.cache.protocol import CacheError
from wam_core.common.config import ActionExpertParams
from wam_core.common.params import ConfigError
from wam_core.common.paths import resolve_path
from wam_core.common.status import ERROR, OK, WARN
from wam_core.control.joint_state import JointStateError, JointStateMapper
from wam_core.models.action_expert import load_action_expert
from wam_core.models.manifest import ManifestError
from wam_core.serving.action_ticker import ActionTicker, Descriptor
from wam_core.serving.latency import LatencyWindow, RateMeter, StageTimer
from wam_interfaces.msg import ActionExpertStatus, ActiveSubtask, RepresentationDescriptor
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import NodeParams
from wam_util.status import TypedStatus


class ActionExpertNode(LifecycleNode):
    def __init__(self, name: str = 'action_expert', cache=None, **kwargs):
        super().__init__(name, **kwargs)
        self.params = NodeParams(self, ActionExpertParams)
        self.cfg: ActionExpertParams | None = None
        self._shared_cache = cache
        self.cache = None
        self.ticker = None
        self._timer = None
        self._diag_timer = None
        self._subs = []
        self.timer_stats = StageTimer('cache_read', 'prepare', 'forward', 'publish', 'tick')
        self.period = LatencyWindow()
        # camera stamp -> first chunk that used its representation
        self.obs_to_action = LatencyWindow()
        self._last_fire = None
        self.rejected = {}
        self.last_reason = ''
        self._out_rate = RateMeter()
        self._joint_rate = RateMeter()
        self._repr_rate = RateMeter()
        self.ready = False
        self._diag_due = False
        # The tick gets its own group so a multi-threaded executor never queues it
        # behind a subscription callback.
        self._tick_group = MutuallyExclusiveCallbackGroup()
        self.diagnostics = NodeDiagnostics(self)
        self.status = TypedStatus(
            self, self.diagnostics, 'action expert', ActionExpertStatus, '~/status', self._status
        )

    # lifecycle ----------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.cfg = cfg = self.params.read()
            torch.set_num_threads(cfg.num_threads)
            model_dir = resolve_path(cfg.model_dir)
            model, manifest = load_action_expert(model_dir, cfg.precision)
            if model.config.num_joints != len(cfg.robot.joint_names):
                raise ValueError(
                    f'model outputs {model.config.num_joints} joints but robot.joint_names '
                    f'has {len(cfg.robot.joint_names)}'
                )
            self.cache = (
                self._shared_cache
                if self._shared_cache is not None
                else open_cache_reader(cfg.repr_cache)
            )
        except (ManifestError, CacheError, ConfigError, OSError, ValueError) as exc:
            self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        self.manifest = manifest
        self.world_version = str(manifest.extra.get('world_version', manifest.version))
        self.ticker = ActionTicker(
            model,
            self.cache,
            self.world_version,
            model.config.num_joints,
            model.config.subtask_dim,
            cfg.timeout_ms,
        )
        self.joints = JointStateMapper(cfg.robot.joint_names)
        self._pub = self.create_lifecycle_publisher(
            JointTrajectory, '/action_expert/raw_chunk', qos.EVENTS
        )
        self._subs = [
            self.create_subscription(
                JointState, '/joint_states', self._on_joint_state, qos.SENSOR
            ),
            self.create_subscription(
                RepresentationDescriptor,
                '/world_expert/representation',
                self._on_descriptor,
                qos.EVENTS,
            ),
            # latched: an expert that (re)starts mid-task still gets the active subtask
            self.create_subscription(
                ActiveSubtask,
                '/harness/active_subtask',
                self._on_subtask,
                qos.LATCHED,
            ),
        ]
        self.subtask_text = '(none: default conditioning)'
        self.get_logger().info(
            f'action expert {manifest.name} version {manifest.version} loaded from {model_dir}; '
            f'accepts world version {self.world_version}, chunk {model.config.chunk_size}'
            f'x{model.config.num_joints}'
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        t0 = time.perf_counter()
        self.ticker.warmup(self.cfg.warmup_requests, self.ticker.model.representation_shape)
        self._timer = self.create_timer(
            self.cfg.control.period_s, self._tick, callback_group=self._tick_group
        )
        self.diagnostics.start()
        self._diag_timer = self.create_timer(self.diagnostics.TIMER_S, self._diagnostics_due)
        self.ready = True
        self._diag_due = True  # report at the first tick: after a restart the harness waits on it
        self.get_logger().info(
            f'ready: warm-up {self.cfg.warmup_requests} passes in '
            f'{(time.perf_counter() - t0) * 1e3:.0f} ms; ticking every '
            f'{self.cfg.control.period_s * 1e3:.1f} ms'
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.ready = False
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        here = self.ticker.joint_positions
        if here is not None:  # leave the robot holding, not mid-chunk
            self._pub.publish(
                convert.joint_trajectory(
                    self.cfg.robot.joint_names, here.reshape(1, -1), time.time_ns(), 0.0
                )
            )
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        self.ready = False
        for t in (self._timer, self._diag_timer):
            if t is not None:
                self.destroy_timer(t)
        self._timer = self._diag_timer = None
        if self.cache is not None and self._shared_cache is None:
            self.cache.close()
        self.cache = None

    # inputs -------------------------------------------------------------------
    def _reject(self, what: str, exc: Exception) -> None:
        self.rejected[what] = self.rejected.get(what, 0) + 1
        self.get_logger().warning(f'rejected {what}: {exc}', throttle_duration_sec=1.0)

    def _on_joint_state(self, msg: JointState) -> None:
        self._joint_rate.tick(time.monotonic())
        try:
            self.ticker.set_joint_state(self.joints.map(msg.name, msg.position))
        except JointStateError as exc:
            self._reject('joint_state', exc)

    def _on_subtask(self, msg: ActiveSubtask) -> None:
        try:
            self.ticker.set_subtask(np.asarray(msg.embedding, dtype=np.float32))
        except ValueError as exc:
            self._reject('active_subtask', exc)
            return
        self.subtask_text = msg.subtask.text

    def _on_descriptor(self, msg: RepresentationDescriptor) -> None:
        self._repr_rate.tick(time.monotonic())
        if self.cache is not None and 0 < self.cache.capacity <= msg.slot:
            self._reject(
                'descriptor',
                ValueError(f'slot {msg.slot} outside the ring of {self.cache.capacity}'),
            )
            return
        self.ticker.set_descriptor(Descriptor(msg.key, msg.model_version, msg.slot, msg.epoch))

    # the 50 Hz tick -------------------------------------------------------------
    def _tick(self) -> None:
        t0 = time.perf_counter()
        if self._last_fire is not None:
            self.period.add((t0 - self._last_fire) * 1e3)
        self._last_fire = t0
        res = self.ticker.tick()
        for stage, ms in res.stages.items():
            self.timer_stats.add(stage, ms)
        if res.kind == 'skip':
            self._note_degraded(res.reason)
            return
        t1 = time.perf_counter()
        start_ns = time.time_ns()
        msg = convert.joint_trajectory(
            self.cfg.robot.joint_names, res.positions, start_ns, self.cfg.control.period_s
        )
        self._pub.publish(msg)
        if res.new_representation:
            self.obs_to_action.add((time.time_ns() - res.obs_stamp_ns) / 1e6)
        self._out_rate.tick(time.monotonic())
        t2 = time.perf_counter()
        self.timer_stats.add('publish', (t2 - t1) * 1e3)
        self.timer_stats.add('tick', (t2 - t0) * 1e3)
        if res.kind == 'hold':
            self._note_degraded(res.reason)
        else:
            self.last_reason = ''
        if self._diag_due:
            self._publish_diagnostics()

    def _diagnostics_due(self) -> None:
        # Building the status (percentiles, ~30 key/values) takes ~1 ms of Python. Done
        # here it would delay the next tick whenever the two coincide (2% of ticks at
        # 1 Hz, i.e. the period p99); so while ticking it runs in the slack right after a
        # tick, and only runs here when the timer is not ticking.
        if not self.diagnostics.due():
            return
        if self._timer is not None and not self._timer.is_canceled():
            self._diag_due = True
        else:
            self._publish_diagnostics()

    def _note_degraded(self, reason: str) -> None:
        if reason != self.last_reason:
            self.get_logger().warning(f'holding: {reason}')
            self.last_reason = reason

    def _publish_diagnostics(self) -> None:
        self._diag_due = False
        self.diagnostics.publish()

    def _status(self) -> ActionExpertStatus:
        t = self.ticker
        now = time.monotonic()
        hz = 1.0 / self.cfg.control.period_s
        out_rate = self._out_rate.rate(now)
        hits = self.cache.stats.hits if self.cache is not None else 0
        refused = sum(self.cache.stats.refused.values()) if self.cache is not None else 0
        js_rate, js_hz = self._joint_rate.rate(now), self.cfg.expected_joint_state_hz
        rep_rate, rep_hz = self._repr_rate.rate(now), self.cfg.expected_representation_hz
        level, message = OK, 'serving'
        if not self.ready:
            level, message = WARN, 'not active'
        elif self.last_reason == 'version_mismatch':
            level, message = ERROR, f'world model version differs from {self.world_version}'
        elif self.last_reason:
            level, message = WARN, f'holding: {self.last_reason}'
        elif out_rate < 0.9 * hz:
            level, message = WARN, f'chunks at {out_rate:.1f} Hz, expected {hz:.0f} Hz'
        elif js_rate < 0.5 * js_hz:
            level, message = WARN, f'joint_states at {js_rate:.1f} Hz, expected {js_hz:.0f} Hz'
        elif rep_rate < 0.5 * rep_hz:
            level, message = (
                WARN,
                f'representations at {rep_rate:.1f} Hz, expected {rep_hz:.0f} Hz',
            )
        latency = [convert.latency_stats(k, s) for k, s in self.timer_stats.summary().items()]
        latency += [
            convert.latency_stats('period', self.period.summary()),
            convert.latency_stats('obs_to_action', self.obs_to_action.summary()),
        ]
        return ActionExpertStatus(
            level=level,
            message=message,
            active=self.ready,
            world_version_accepted=self.world_version,
            active_subtask=self.subtask_text,
            ticks=t.ticks,
            chunks=t.chunks,
            degraded_ticks=t.degraded_ticks,
            scene_prepares=t.prepares,
            cache_hits=hits,
            cache_refusals=refused,
            cache_hit_rate=hits / (hits + refused) if hits + refused else float('nan'),
            chunk_rate_hz=out_rate,
            expected_chunk_hz=hz,
            joint_state_rate_hz=js_rate,
            expected_joint_state_hz=js_hz,
            representation_rate_hz=rep_rate,
            expected_representation_hz=rep_hz,
            degraded=convert.reason_counts(t.degraded),
            rejected_inputs=convert.reason_counts(self.rejected),
            latency=latency,
        )


def main(args=None) -> None:
    """Stand-alone process (multi-process mode): shared-memory cache, self-activating."""
    # A thread waiting for the GIL waits a whole switch interval (5 ms by default)
    # before asking for it; 0.5 ms keeps the tick from queueing behind DDS callbacks.
    sys.setswitchinterval(0.0005)
    run_node(ActionExpertNode, args, lifecycle=True)


if __name__ == '__main__':
    main()
