"""World expert: /camera/image_raw -> encode once -> representation cache -> descriptor.

A managed (lifecycle) node. configure: read the parameters, verify the manifest and
load the model and the cache; activate: warm up, then subscribe; deactivate: stop
taking frames. Its typed status goes to ~/status with every /diagnostics report.
"""

from __future__ import annotations

import threading
import time

import torch
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import Image, JointState

from wam_core.cache.factory import open_cache_writer
from wam_core.cache.protocol import CacheError
from wam_core.common.config import WorldExpertParams
from wam_core.common.params import ConfigError
from wam_core.common.paths import resolve_path
from wam_core.common.status import OK, WARN
from wam_core.control.joint_state import JointStateError, JointStateMapper
from wam_core.models.manifest import ManifestError
from wam_core.models.precision import resolve_precision
from wam_core.models.world_expert import WorldExpert
from wam_core.serving.frame_encoder import FrameEncoder
from wam_core.serving.image import ImageError
from wam_core.serving.latency import RateMeter
from wam_interfaces.msg import RepresentationDescriptor, WorldExpertStatus
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import NodeParams
from wam_util.status import TypedStatus


class WorldExpertNode(LifecycleNode):
    def __init__(self, name: str = 'world_expert', cache=None, **kwargs):
        super().__init__(name, **kwargs)
        self.params = NodeParams(self, WorldExpertParams)
        self.cfg: WorldExpertParams | None = None
        self._shared_cache = cache  # in-process bring-up passes the cache object
        self.cache = None
        self.expert = None
        self.encoder = None
        self._sub = self._js_sub = None
        self._pub = None
        self._diag_timer = None
        self._frame_rate = RateMeter()
        self.ready = False
        # Frames are encoded on a worker thread, newest first (a frame that arrives
        # while one is encoding replaces any waiting one): the executor thread never
        # blocks on the encoder, so in single-process mode the 50 Hz tick keeps time.
        self._pending = None
        self._wake = threading.Condition()
        self._worker = None
        self._running = False
        self.dropped = 0
        self.diagnostics = NodeDiagnostics(self)
        self.status = TypedStatus(
            self, self.diagnostics, 'world expert', WorldExpertStatus, '~/status', self._status
        )

    # lifecycle ----------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.cfg = cfg = self.params.read()
            torch.set_num_threads(cfg.num_threads)
            model_dir = resolve_path(cfg.model_dir)
            self.expert = WorldExpert(model_dir, resolve_precision(cfg.precision))
            if self._shared_cache is not None:
                self._shared_cache.set_model_version(self.expert.version)
                self.cache = self._shared_cache
            else:
                self.cache = open_cache_writer(
                    cfg.repr_cache,
                    self.expert.version,
                    self.expert.shape,
                    logger=self.get_logger().warning,
                )
        except (ManifestError, CacheError, ConfigError, OSError, ValueError) as exc:
            self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        self.encoder = FrameEncoder(
            self.expert,
            self.cache,
            cfg.timeout_ms,
            max_age_ms=cfg.repr_cache.ttl_ms,
        )
        self._joints = JointStateMapper(cfg.robot.joint_names)
        self._pub = self.create_lifecycle_publisher(
            RepresentationDescriptor, '/world_expert/representation', qos.EVENTS
        )
        self.get_logger().info(
            f'world expert {self.expert.manifest.name} version {self.expert.version} '
            f'loaded from {model_dir}, cache backend {self.cache.backend}'
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        mean_s = self.expert.warmup(self.cfg.warmup_requests)
        self._sub = self.create_subscription(
            Image, self.cfg.camera_topic, self._on_image, qos.NEWEST_FRAME
        )
        # joint motion tells a frozen camera (the same frame while the arm moves) from a
        # static scene
        self._js_sub = self.create_subscription(
            JointState, '/joint_states', self._on_joint_state, qos.SENSOR
        )
        self.diagnostics.start()
        self._diag_timer = self.create_timer(
            self.diagnostics.TIMER_S, lambda: self.diagnostics.due() and self.diagnostics.publish()
        )
        self._running = True
        self._worker = threading.Thread(
            target=self._encode_loop, name='world_encoder', daemon=True
        )
        self._worker.start()
        self.ready = True
        self.diagnostics.publish()  # report now: after a restart the harness waits on it
        self.get_logger().info(
            f'ready: warm-up {self.cfg.warmup_requests} encodes, {mean_s * 1e3:.2f} ms each'
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.ready = False
        if self._sub is not None:
            self.destroy_subscription(self._sub)
            self.destroy_subscription(self._js_sub)
            self._sub = self._js_sub = None
        self._stop_worker()
        return super().on_deactivate(state)

    def _stop_worker(self) -> None:
        with self._wake:
            self._running = False
            self._wake.notify()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=2.0)
        self._worker = None

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self.release()
        return TransitionCallbackReturn.SUCCESS

    def release(self) -> None:
        self.ready = False
        self._stop_worker()
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        if self.cache is not None and self._shared_cache is None:
            self.cache.close()  # unlinks the shared-memory segment
        self.cache = None

    # hot path -----------------------------------------------------------------
    def _on_joint_state(self, msg: JointState) -> None:
        try:
            self.encoder.joint_positions = self._joints.map(msg.name, msg.position).copy()
        except JointStateError:
            pass  # bad joint states are rejected and counted by the action expert and harness

    def _on_image(self, msg: Image) -> None:
        self._frame_rate.tick(time.monotonic())
        try:
            self.encoder.check(
                msg.encoding,
                msg.height,
                msg.width,
                msg.step,
                msg.data,
                convert.stamp_to_ns(msg.header.stamp),
            )
        except ImageError as exc:
            self.get_logger().warning(f'rejected camera frame: {exc}', throttle_duration_sec=1.0)
            return
        with self._wake:
            if self._pending is not None:
                self.dropped += 1
            self._pending = msg
            self._wake.notify()

    def _encode_loop(self) -> None:
        torch.set_num_threads(self.cfg.num_threads)  # per-thread in OpenMP builds
        while True:
            with self._wake:
                while self._pending is None and self._running:
                    self._wake.wait()
                if not self._running:
                    return
                msg, self._pending = self._pending, None
            try:
                self._encode(msg)
            except Exception as exc:  # never let one frame kill the encoder
                self.get_logger().error(f'encode failed: {exc!r}', throttle_duration_sec=1.0)

    def _encode(self, msg: Image) -> None:
        stamp_ns = convert.stamp_to_ns(msg.header.stamp)
        try:
            out = self.encoder.process(
                msg.encoding, msg.height, msg.width, msg.step, msg.data, stamp_ns
            )
        except ImageError as exc:
            self.get_logger().warning(f'rejected camera frame: {exc}', throttle_duration_sec=1.0)
            return
        e = out.entry
        d = RepresentationDescriptor()
        d.header.stamp = msg.header.stamp
        d.header.frame_id = msg.header.frame_id
        d.key, d.model_version = e.key, e.version
        d.backend, d.segment = self.cache.backend, getattr(self.cache, 'segment', '')
        d.slot, d.sequence, d.epoch = e.slot, e.sequence, e.epoch
        d.shape, d.dtype = list(e.shape), e.dtype
        d.encode_s = out.encode_ms / 1e3
        if self._running:  # not while shutting down: the context may be gone
            self._pub.publish(d)

    def _status(self) -> WorldExpertStatus:
        enc = self.encoder
        rate = self._frame_rate.rate(time.monotonic())
        expected = self.cfg.expected_camera_hz
        level, message = OK, 'encoding'
        if not self.ready:
            level, message = WARN, 'not active'
        elif rate < 0.5 * expected:
            level, message = WARN, f'camera at {rate:.1f} Hz, expected {expected:.0f} Hz'
        return WorldExpertStatus(
            level=level,
            message=message,
            active=self.ready,
            model_version=self.expert.version,
            cache_backend=self.cache.backend if self.cache is not None else '',
            camera_rate_hz=rate,
            expected_camera_hz=expected,
            frames=enc.frames,
            world_calls=enc.world_calls,
            cache_hits=enc.hits,
            calls_per_distinct_frame=enc.calls_per_frame(),
            encode_timeouts=enc.timeouts,
            frames_superseded=self.dropped,
            rejected_frames=sum(enc.rejected.values()),
            rejected=convert.reason_counts(enc.rejected),
            latency=[convert.latency_stats(k, s) for k, s in enc.timer.summary().items()],
        )


def main(args=None) -> None:
    """Stand-alone process (multi-process mode): shared-memory cache, self-activating."""
    run_node(WorldExpertNode, args, lifecycle=True)


if __name__ == '__main__':
    main()
