"""Action expert: a 50 Hz timer -> cache read -> action expert -> raw JointTrajectory.

A managed (lifecycle) node. configure: verify the manifest, load the model, attach
to the cache; activate: warm up, start the timer; deactivate: stop the timer and
publish a hold. Each tick never waits for the world expert: it uses the newest
representation that passes the version, TTL and seqlock checks, or holds.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from wam_core import ros_convert as rc
from wam_core.action_expert import load_action_expert
from wam_core.action_service import ActionTicker, Descriptor
from wam_core.config import ConfigError, resolve_path
from wam_core.joint_state import JointStateError, JointStateMapper
from wam_core.latency import LatencyWindow, RateMeter, StageTimer
from wam_core.manifest import ManifestError
from wam_core.repr_cache import CacheError, open_cache_reader
from wam_interfaces.msg import ActiveSubtask, RepresentationDescriptor
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import declare_stack_config, read_stack_config


class ActionExpertNode(LifecycleNode):
    def __init__(self, name: str = 'action_expert', cache=None, **kwargs):
        super().__init__(name, **kwargs)
        declare_stack_config(self)
        self.declare_parameter('expected_joint_state_hz', 100.0)
        self.declare_parameter('expected_representation_hz', 30.0)
        self._shared_cache = cache
        self.cache = None
        self.ticker = None
        self._timer = None
        self._diag_timer = None
        self._subs = []
        self.timer_stats = StageTimer('cache_read', 'prepare', 'forward', 'publish', 'tick')
        self.period = LatencyWindow()
        self.obs_to_action = (
            LatencyWindow()
        )  # camera stamp -> first chunk that used its representation
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
        self.diagnostics = NodeDiagnostics(self, 'action expert', self._diagnostics)

    # lifecycle ----------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.cfg = read_stack_config(self)
            torch.set_num_threads(self.cfg.runtime.num_threads)
            model_dir = resolve_path(self.cfg.experts.action.model_dir)
            model, manifest = load_action_expert(model_dir, self.cfg.runtime.action_precision)
            if model.config.num_joints != len(self.cfg.control.joint_names):
                raise ValueError(
                    f'model outputs {model.config.num_joints} joints but control.joint_names '
                    f'has {len(self.cfg.control.joint_names)}'
                )
            self.cache = (
                self._shared_cache
                if self._shared_cache is not None
                else open_cache_reader(self.cfg.repr_cache)
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
            self.cfg.runtime.timeout_action_ms,
        )
        self.joints = JointStateMapper(self.cfg.control.joint_names)
        self._pub = self.create_lifecycle_publisher(
            JointTrajectory, '/action_expert/raw_chunk', 10
        )
        self._subs = [
            self.create_subscription(
                JointState, '/joint_states', self._on_joint_state, qos_profile_sensor_data
            ),
            self.create_subscription(
                RepresentationDescriptor, '/world_expert/representation', self._on_descriptor, 10
            ),
            # latched: an expert that (re)starts mid-task still gets the active subtask
            self.create_subscription(
                ActiveSubtask,
                '/harness/active_subtask',
                self._on_subtask,
                QoSProfile(
                    depth=1,
                    durability=DurabilityPolicy.TRANSIENT_LOCAL,
                    reliability=ReliabilityPolicy.RELIABLE,
                ),
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
        self.ticker.warmup(
            self.cfg.runtime.warmup_requests, (65, self.ticker.model.config.repr_dim)
        )
        self._timer = self.create_timer(
            self.cfg.control.period_s, self._tick, callback_group=self._tick_group
        )
        self.diagnostics.start()
        self._diag_timer = self.create_timer(self.diagnostics.TIMER_S, self._diagnostics_due)
        self.ready = True
        self._diag_due = True  # report at the first tick: after a restart the harness waits on it
        self.get_logger().info(
            f'ready: warm-up {self.cfg.runtime.warmup_requests} passes in '
            f'{(time.perf_counter() - t0) * 1e3:.0f} ms; ticking every {self.cfg.control.period_s * 1e3:.1f} ms'
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.ready = False
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        if self.ticker._joint_np is not None:  # leave the robot holding, not mid-chunk
            self._pub.publish(
                rc.joint_trajectory(
                    self.cfg.control.joint_names,
                    self.ticker._joint_np.reshape(1, -1),
                    time.time_ns(),
                    0.0,
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
        msg = rc.joint_trajectory(
            self.cfg.control.joint_names, res.positions, start_ns, self.cfg.control.period_s
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

    def _diagnostics(self):
        t = self.ticker
        now = time.monotonic()
        hz = 1.0 / self.cfg.control.period_s
        out_rate = self._out_rate.rate(now)
        level, message = rc.OK, 'serving'
        hits = self.cache.stats.hits if self.cache is not None else 0
        refused = dict(self.cache.stats.refused) if self.cache is not None else {}
        total = hits + sum(refused.values())
        if not self.ready:
            level, message = rc.WARN, 'not active'
        elif self.last_reason == 'version_mismatch':
            level, message = rc.ERROR, f'world model version differs from {self.world_version}'
        elif self.last_reason:
            level, message = rc.WARN, f'holding: {self.last_reason}'
        elif out_rate < 0.9 * hz:
            level, message = rc.WARN, f'chunks at {out_rate:.1f} Hz, expected {hz:.0f} Hz'
        js_rate, js_hz = (
            self._joint_rate.rate(now),
            self.get_parameter('expected_joint_state_hz').value,
        )
        rep_rate, rep_hz = (
            self._repr_rate.rate(now),
            self.get_parameter('expected_representation_hz').value,
        )
        if level == rc.OK and js_rate < 0.5 * js_hz:
            level, message = rc.WARN, f'joint_states at {js_rate:.1f} Hz, expected {js_hz:.0f} Hz'
        elif level == rc.OK and rep_rate < 0.5 * rep_hz:
            level, message = (
                rc.WARN,
                f'representations at {rep_rate:.1f} Hz, expected {rep_hz:.0f} Hz',
            )
        values = [
            ('world version accepted', self.world_version),
            ('active subtask', self.subtask_text),
            ('ticks', t.ticks),
            ('chunks', t.chunks),
            ('degraded ticks', t.degraded_ticks),
            ('scene prepares', t.prepares),
            ('cache hit rate', hits / total if total else float('nan')),
            ('chunk rate Hz', out_rate),
            ('expected chunk Hz', hz),
            ('joint_states rate Hz', js_rate),
            ('expected joint_states Hz', js_hz),
            ('representation rate Hz', rep_rate),
            ('expected representation Hz', rep_hz),
        ]
        values += [(f'degraded: {k}', v) for k, v in sorted(t.degraded.items())]
        values += [(f'rejected: {k}', v) for k, v in sorted(self.rejected.items())]
        for stage, s in self.timer_stats.summary().items():
            values += rc.latency_values(stage, s)
        values += rc.latency_values('period', self.period.summary())
        values += rc.latency_values('obs_to_action', self.obs_to_action.summary())
        return level, message, values


def main(args=None) -> None:
    """Stand-alone process (multi-process mode): shared-memory cache, self-activating."""
    # A thread waiting for the GIL waits a whole switch interval (5 ms by default)
    # before asking for it; 0.5 ms keeps the tick from queueing behind DDS callbacks.
    sys.setswitchinterval(0.0005)
    run_node(ActionExpertNode, args, lifecycle=True)


if __name__ == '__main__':
    main()
