"""World expert: camera/image_raw -> encode once -> representation cache -> descriptor.

One robot (``robots`` empty: the topics in the node's namespace) or a fleet (``robots``
lists their namespaces: /<robot>/camera/image_raw in, /<robot>/world_expert/representation
out, one cache ring per robot). Frames of different robots that arrive within the
batching window are encoded in one forward pass (``wam_core.serving.batch_window``).

A managed (lifecycle) node. configure: read the parameters, verify the manifest and
load the model and the caches; activate: warm up, then subscribe; deactivate: stop
taking frames. Its typed status goes to ~/status with every /diagnostics report (and,
for a fleet, to /<robot>/world_expert/status, where each robot's harness listens).
"""

from __future__ import annotations

import functools
import threading
import time

import torch
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import Image, JointState

from wam_core.cache.factory import open_cache_writer, ring_slots
from wam_core.cache.freshness import Freshness
from wam_core.cache.protocol import CacheError
from wam_core.common.clock import wall_ns
from wam_core.common.config import WorldExpertParams
from wam_core.common.params import ConfigError
from wam_core.common.paths import resolve_path
from wam_core.common.robot import robot_of_namespace
from wam_core.common.status import OK, WARN
from wam_core.common.thread_errors import ThreadErrors
from wam_core.control.joint_state import JointStateError, JointStateMapper
from wam_core.models.manifest import ManifestError
from wam_core.models.registry import enable_cuda_graphs, enable_torchscript, load_world_expert
from wam_core.releases.loading import (
    FAILED,
    LOADED,
    BackgroundLoad,
    paced,
    rss_mb,
    start_load,
)
from wam_core.releases.registry import (
    RegistryError,
    look_up,
    verify_release_dir,
)
from wam_core.serving.batch_window import BatchWindow
from wam_core.serving.fleet_encoder import FleetEncoder, Frame
from wam_core.serving.frame_encoder import FrameEncoder
from wam_core.serving.image import ImageError
from wam_core.serving.interpreter import freeze_heap
from wam_core.serving.latency import RateMeter
from wam_core.serving.realtime import request_nice
from wam_core.serving.view_sync import ViewSync
from wam_interfaces.msg import (
    ActiveSubtask,
    RepresentationDescriptor,
    RobotEncoding,
    WorldExpertStatus,
)
from wam_interfaces.srv import SwitchRelease
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.metrics import NodeMetrics
from wam_util.params import NodeParams
from wam_util.quiet_log import QuietLog
from wam_util.release_query import ReleaseQuestion
from wam_util.status import TypedStatus

# how often a (re)started world expert looks for robots whose action expert it has not yet
# asked which release it serves (see _check_releases)
RELEASE_CHECK_S = 0.2
# how long it waits for a robot's action expert's service before it asks the robot's
# standby node on an action-expert instance instead (the primary is down meanwhile: the
# standby drives the robot; asked first, a standby discovered before a live primary would
# answer for a robot it does not drive)
STANDBY_ASKED_AFTER_S = 2.0


class WorldExpertNode(LifecycleNode):
    def __init__(self, name: str = 'world_expert', cache=None, **kwargs):
        """``cache``: for an in-process bring-up, the cache object (one robot) or a
        {robot: cache} mapping (a fleet)."""
        super().__init__(name, **kwargs)
        self.params = NodeParams(self, WorldExpertParams)
        self.cfg: WorldExpertParams | None = None
        self._shared_cache = cache
        try:
            robots = self.params.read().robots
        except ConfigError:
            robots = []  # configure reports it
        # '' is a lone robot in this node's namespace (relative topic names)
        self.fleet = bool(robots)
        self.robots = list(robots) or [robot_of_namespace(self.get_namespace())]
        self.caches: dict[str, object] = {}
        self.encoders: dict[str, FrameEncoder] = {}
        self.fleet_encoder: FleetEncoder | None = None
        self.expert = None
        self.metrics: NodeMetrics | None = None
        self._subs = []
        self._pubs: dict[str, object] = {}
        self._diag_timer = None
        self._frame_rates: dict[str, RateMeter] = {r: RateMeter() for r in self.robots}
        self.views: tuple[str, ...] = ()  # the model's camera views (its spec)
        # a model that reads the task's text (a VLM's prompt): each robot's active subtask
        self._prompts: dict[str, str] = {r: '' for r in self.robots}
        self.rejected_subtasks = 0
        self._syncs: dict[str, ViewSync] = {}  # per robot, when the model has several views
        self.cache_write_failures = 0
        # exceptions the encoder thread survived, with their tracebacks in the log
        self.thread_errors = ThreadErrors(lambda m: self.get_logger().error(m))
        # rejected frames and cache-write failures: the first at once, then one line a second
        self.quiet = QuietLog(self.get_logger())
        self.ready = False
        # model releases (``switch_release``): every world expert loaded, by release name,
        # which one each robot's observations are encoded with, loads under way, and the
        # switches the encoder thread applies before its next batch
        self.models: dict[str, object] = {}
        self.robot_release: dict[str, str] = {}
        self.switched_at: dict[str, float] = {}
        self._loads: dict[str, BackgroundLoad] = {}
        self._pending_use: dict[str, str] = {}
        self._status_due = False
        self._switch_srv = None
        # A (re)started world expert encodes with the release its parameters name, which
        # need not be the one the robots were switched to since: it asks each robot's
        # action expert once which release it serves, and encodes that robot's frames with
        # that release's world expert (found in the registry, loaded, then committed);
        # with the robot's action expert down, the standby node that drives the robot
        # robot -> its action expert's question, then its standby node's
        self._release_questions: dict[str, tuple[ReleaseQuestion, ReleaseQuestion]] = {}
        self._release_asked_since = 0.0  # when it became ready to ask (monotonic s)
        self._release_timer = None
        self._release_checked: set[str] = set()
        # robot -> (release, world dir, manifest sha256, switch count when answered)
        self._release_wanted: dict[str, tuple[str, str, str, int]] = {}
        self._release_replaced: set[str] = set()  # releases an adoption took robots from
        # switch_release calls that change something (not status): a release manager's
        # switch during an adoption decides, and the adoption gives up
        self._switch_calls = 0
        # Frames are encoded on a worker thread, newest first per robot (a frame that
        # arrives while its robot's last one waits replaces it), batched across robots:
        # the executor thread never blocks on the encoder, so in single-process mode the
        # 50 Hz tick keeps time.
        self.window: BatchWindow | None = None
        self._wake = threading.Condition()
        self._worker = None
        self._encoder_scheduled = threading.Event()
        self.encoder_nice_error = ''  # why the encoder keeps the default nice value
        self._running = False
        self.diagnostics = NodeDiagnostics(self)
        self.status = TypedStatus(
            self,
            self.diagnostics,
            'world expert',
            WorldExpertStatus,
            '~/status',
            self._status,
            also=tuple(self._topic(r, 'world_expert/status') for r in robots),
        )

    def _topic(self, robot: str, name: str) -> str:
        """A robot's topic: /<robot>/<name> in a fleet, relative for a lone robot."""
        return f'/{robot}/{name}' if self.fleet else name

    @property
    def encoder(self) -> FrameEncoder | None:
        """The first (for one robot: the only) robot's encoder."""
        return self.encoders.get(self.robots[0])

    @property
    def cache(self):
        return self.caches.get(self.robots[0])

    # lifecycle ----------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.cfg = cfg = self.params.read()
            torch.set_num_threads(cfg.num_threads)
            model_dir = resolve_path(cfg.model_dir)
            self.expert = load_world_expert(model_dir, cfg.precision, device=cfg.device)
            release = cfg.release or self.expert.version
            self.models = {release: self.expert}
            self.robot_release = {r: release for r in self.robots}
            # cuda_ipc keeps the representation on the device: no copy to the host and back
            self.expert.output_on_device = (
                cfg.repr_cache.backend == 'cuda_ipc' and cfg.device != 'cpu'
            )
            if cfg.cuda_graphs:
                enable_cuda_graphs(self.expert, tuple(range(1, cfg.batch.max_size + 1)))
            shared = self._shared_cache
            for robot in self.robots:
                spec = self.expert.spec
                if shared is not None:
                    cache = shared[robot] if isinstance(shared, dict) else shared
                    cache.set_model_version(self.expert.version)
                    if hasattr(cache, 'set_capacity'):  # the model's ring size (large ones)
                        cache.set_capacity(ring_slots(cache.capacity, spec.max_cache_slots))
                else:
                    cache = open_cache_writer(
                        cfg.repr_cache,
                        self.expert.version,
                        spec.shape,
                        logger=self.get_logger().warning,
                        robot=robot,
                        dtype=spec.dtype,
                        max_slots=spec.max_cache_slots,
                    )
                self.caches[robot] = cache
            # each robot's freshness bound (auto: its camera's period + timeout_ms)
            self.freshness = {
                r: Freshness(cfg.repr_cache.ttl_ms, cfg.expected_camera_hz, cfg.timeout_ms)
                for r in self.robots
            }
            self.encoders = {
                r: FrameEncoder(
                    self.expert,
                    c,
                    cfg.timeout_ms,
                    max_age_ms=self.freshness[r].ttl_ms,
                    max_future_ms=cfg.frame_checks.max_future_ms,
                    frozen_motion=cfg.frame_checks.frozen_motion_rad,
                )
                for r, c in self.caches.items()
            }
            self.views = self.expert.spec.view_names
            self._syncs = {}
            if len(self.views) > 1:
                tol = int(cfg.view_tolerance_ms * 1e6)
                self._syncs = {r: ViewSync(self.views, tol) for r in self.robots}
        except (ManifestError, CacheError, ConfigError, OSError, ValueError, KeyError) as exc:
            self.get_logger().error(f'configure failed: {exc}')
            self._close_caches()
            return TransitionCallbackReturn.FAILURE
        timer = self.encoder.timer  # one set of stage figures for the fleet
        for e in self.encoders.values():
            e.timer = timer
        self.fleet_encoder = FleetEncoder(self.expert, self.encoders)
        self.window = BatchWindow(
            cfg.batch.max_size, cfg.batch.max_wait_us * 1e-6, len(self.robots)
        )
        self._joints = JointStateMapper(cfg.robot.joint_names)
        self._pubs = {
            r: self.create_lifecycle_publisher(
                RepresentationDescriptor, self._topic(r, 'world_expert/representation'), qos.EVENTS
            )
            for r in self.robots
        }
        self._switch_srv = self.create_service(
            SwitchRelease, 'world_expert/switch_release', self._on_switch_release
        )
        self._release_checked, self._release_wanted, self._release_replaced = set(), {}, set()
        self._release_questions = {
            r: tuple(
                ReleaseQuestion(
                    self.create_client(SwitchRelease, self._topic(r, f'{node}/switch_release'))
                )
                for node in ('action_expert', 'action_expert_standby')
            )
            for r in self.robots
        }
        self._release_timer = self.create_timer(RELEASE_CHECK_S, self._check_releases)
        self.metrics = NodeMetrics(self, cfg.metrics_port)
        for stage in timer.stages:  # per observation
            self.metrics.latency(stage, timer.stages[stage])
        self.metrics.status('world_expert', self.status)
        self.metrics.start()
        # diagnostics from configure to cleanup: a configured, inactive expert says so
        self._diag_timer = self.create_timer(self.diagnostics.TIMER_S, self._diagnostics_due)
        served = ', '.join(r or '(this namespace)' for r in self.robots)
        self.get_logger().info(
            f'world expert {self.expert.name} version {self.expert.version} '
            f'({getattr(self.expert, "precision", cfg.precision)}) loaded from {model_dir}, '
            f'cache backend {self.cache.backend}; serving {served}'
        )
        return TransitionCallbackReturn.SUCCESS

    def _torchscript(self, expert, sizes: tuple[int, ...]) -> None:
        """On a CPU: the expert's forward as TorchScript graphs, one per batch size, so
        an encode holds no GIL (models/torchscript.py); where that fails it stays eager."""
        if not self.cfg.traces_forward:
            return
        if not hasattr(expert, 'enable_torchscript'):  # optional: a plug-in keeps its own
            self.get_logger().info(f'{expert.name}: its own forward (no enable_torchscript)')
            return
        why = enable_torchscript(expert, sizes)
        if why:
            self.get_logger().warning(f'{expert.name}: eager forward, no TorchScript ({why})')

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        sizes = tuple(range(1, self.window.max_size + 1))
        self._torchscript(self.expert, sizes)
        mean_s = self.expert.warmup(self.cfg.warmup_requests, sizes)
        freeze_heap()  # the model and warm-up stay: no later collection walks them
        for robot in self.robots:
            for view in self.views:  # one camera topic per view the model needs
                topic = self.cfg.topic_of(view)
                self._subs.append(
                    self.create_subscription(
                        Image,
                        self._topic(robot, topic.lstrip('/')) if self.fleet else topic,
                        lambda msg, r=robot, v=view: self._on_image(r, v, msg),
                        qos.NEWEST_FRAME,
                    )
                )
            if self.expert.spec.prompt:  # the prompt: the subtask the harness runs (latched)
                self._subs.append(
                    self.create_subscription(
                        ActiveSubtask,
                        self._topic(robot, 'harness/active_subtask'),
                        lambda msg, r=robot: self._on_subtask(r, msg),
                        qos.LATCHED,
                    )
                )
            # joint motion tells a frozen camera (the same frame while the arm moves)
            # from a static scene
            self._subs.append(
                self.create_subscription(
                    JointState,
                    self._topic(robot, 'joint_states'),
                    lambda msg, r=robot: self._on_joint_state(r, msg),
                    qos.SENSOR,
                )
            )
        self.diagnostics.start()
        self._running = True
        self._worker = threading.Thread(
            target=self._encode_loop, name='world_encoder', daemon=True
        )
        self._encoder_scheduled.clear()
        self._worker.start()
        self.ready = True
        self._release_asked_since = time.monotonic()
        self.diagnostics.publish()  # report now: after a restart the harness waits on it
        self._encoder_scheduled.wait(1.0)
        if self.encoder_nice_error:
            self.get_logger().warning(
                f'encoder thread at the default priority: {self.encoder_nice_error}; '
                'grant CAP_SYS_NICE, or set encoder_nice 0'
            )
        nice = self.cfg.encoder_nice if not self.encoder_nice_error else 0
        self.get_logger().info(
            f'ready: warm-up {self.cfg.warmup_requests} encodes, {mean_s * 1e3:.2f} ms each'
            + (f'; encoder at nice {nice}' if nice else '')
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.ready = False
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        if not self._stop_worker():
            return TransitionCallbackReturn.FAILURE
        return super().on_deactivate(state)

    def _stop_worker(self) -> bool:
        """Stop the encoder thread; False (logged) if an encode outlived 2 s: then the
        caches it may still write are left alone and the transition fails."""
        with self._wake:
            self._running = False
            self._wake.notify()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=2.0)
            if worker.is_alive():
                self.get_logger().error(
                    'the encoder thread did not stop within 2 s (an encode still running): '
                    'its caches stay open'
                )
                return False
        self._worker = None
        return True

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        ok = self.release()
        return TransitionCallbackReturn.SUCCESS if ok else TransitionCallbackReturn.FAILURE

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        ok = self.release()
        return TransitionCallbackReturn.SUCCESS if ok else TransitionCallbackReturn.FAILURE

    def release(self) -> bool:
        """Stop serving and free the caches; False if the encoder thread would not stop
        (the caches are then left to it)."""
        self.ready = False
        if not self._stop_worker():
            return False
        for sub in self._subs:  # (deactivate destroys them; a shutdown from active not)
            self.destroy_subscription(sub)
        self._subs = []
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        # what configure created goes with cleanup, its mirror
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
            self._diag_timer = None
        for pub in self._pubs.values():
            self.destroy_lifecycle_publisher(pub)
        self._pubs = {}
        if self._switch_srv is not None:
            self.destroy_service(self._switch_srv)
            self._switch_srv = None
        if self._release_timer is not None:
            self.destroy_timer(self._release_timer)
            self._release_timer = None
        for question in (q for qs in self._release_questions.values() for q in qs):
            self.destroy_client(question.client)
        self._release_questions = {}
        self._loads, self._pending_use = {}, {}
        self._close_caches()
        return True

    def _close_caches(self) -> None:
        if self._shared_cache is None:
            for cache in self.caches.values():
                cache.close()  # unlinks the shared-memory segment
        self.caches = {}

    def _diagnostics_due(self) -> None:
        if self._status_due or self.diagnostics.due():
            self._status_due = False
            self.diagnostics.publish()

    # model releases -------------------------------------------------------------
    def _on_switch_release(self, request, response):
        """SwitchRelease phases (see the .srv): load beside the served model, commit robots
        to it from their next observation, confirm (unload what no robot uses), abort."""
        try:
            ok, message = self._switch_phase(request)
        except Exception as exc:  # a bad request never takes the node down
            ok, message = False, f'{type(exc).__name__}: {exc}'
        if request.phase != 'status':
            self._switch_calls += 1
        name = request.release
        load = self._loads.get(name)
        response.success, response.message = ok, message
        robots = list(request.robots) or self.robots
        serving = [r for r in robots if self.robot_release.get(r) == name]
        response.active_release = self.robot_release.get(robots[0], '') if robots else ''
        if robots and robots[0] in self._release_wanted:
            # adopting a release itself (restarted): asked again by a node that restarted too
            response.active_release = ''
        if serving and len(serving) == len(robots):
            response.state = 'serving'
        elif name in self.models:
            response.state = 'loaded'
        else:
            response.state = load.state if load is not None else 'idle'
        if load is not None and load.state == FAILED and ok:
            response.message = f'{message}: {load.error}'
        response.switched_at = min((self.switched_at.get(r, 0.0) for r in serving), default=0.0)
        response.rss_mb = rss_mb()
        response.load_peak_rss_mb = load.peak_rss_mb if load is not None else 0.0
        return response

    def _switch_phase(self, req) -> tuple[bool, str]:
        if self.expert is None:
            return False, 'not configured'
        name, phase = req.release, req.phase
        unknown = [r for r in req.robots if r not in self.robot_release]
        if unknown:
            return False, f'not serving the robots {unknown} (serving {self.robots})'
        if phase == 'status':
            self._finish_loads()
            return True, 'status'
        if not name:
            return False, 'no release named'
        if phase == 'load':
            self._finish_loads()
            if name in self.models:
                return True, f'{name} is already loaded'
            return start_load(self._loads, req, self._load_release, self.get_logger().info)
        if phase == 'commit':
            self._finish_loads()
            if name not in self.models:
                load = self._loads.get(name)
                return False, f'{name} is {load.state if load else "not loaded"}: load it first'
            robots = list(req.robots) or self.robots
            with self._wake:  # the encoder thread applies it before its next batch
                for r in robots:
                    self._pending_use[r] = name
                self._wake.notify()
            self.get_logger().info(f'release {name}: encoding for {", ".join(robots)} from now')
            return True, f'{name} committed for {", ".join(robots)}'
        if phase in ('confirm', 'abort'):
            self._finish_loads()
            with self._wake:  # the encoder thread applies commits under it
                used = set(self.robot_release.values()) | set(self._pending_use.values())
                if phase == 'abort':
                    if name in used:
                        return False, f'{name} is serving: commit another release instead'
                    self._loads.pop(name, None)
                    self.models.pop(name, None)
                    return True, f'{name} unloaded'
                dropped = [k for k in self.models if k not in used]
                for k in dropped:
                    del self.models[k]
            self._loads = {}
            # the reference model (shapes, views, device a new release must match) is one
            # that serves: a dropped one is let go
            self.expert = self.models[self.robot_release[self.robots[0]]]
            self.fleet_encoder.expert = self.expert
            return True, f'{name} confirmed' + (
                f'; unloaded {", ".join(dropped)}' if dropped else ''
            )
        return False, f'unknown phase {phase!r} (load, commit, confirm, abort, status)'

    # a restart after a switch ---------------------------------------------------
    def _check_releases(self) -> None:
        """On the executor, while active: ask each robot's action expert, once answered
        never again (from then on the release manager switches both experts together),
        which release it serves; for one this expert encodes with another, load that
        release's world expert from the registry and commit the robot to it."""
        if not self.ready:
            return
        standby_too = time.monotonic() - self._release_asked_since > STANDBY_ASKED_AFTER_S
        for robot in self.robots:
            if robot in self._release_checked or robot in self._release_wanted:
                continue
            primary, standby = self._release_questions.get(robot, (None, None))
            if primary is None:
                continue
            answer = functools.partial(self._on_release_answer, robot)
            if not primary.ask(answer) and standby_too:
                standby.ask(answer)  # its action expert is down: the node driving it
        for robot, wanted in list(self._release_wanted.items()):
            self._adopt(robot, *wanted)
        if self._release_replaced and not self._release_wanted:
            self._drop_unused()

    def _on_release_answer(self, robot: str, res) -> None:
        name = res.active_release if res.success else ''
        if not name or robot in self._release_checked or robot in self._release_wanted:
            return  # not configured, or adopting a release itself: asked again
        who = robot or 'the robot'
        with self._wake:
            encoding = self._pending_use.get(robot, self.robot_release.get(robot))
        if name == encoding:
            self._release_checked.add(robot)
            return
        try:
            rel = look_up(name, self.cfg.releases_db)
            if res.active_manifest_sha256 and res.active_manifest_sha256 != rel.action_digest:
                # a model version that names another pair in the registry, not a release
                raise RegistryError(f'{name} in the registry is another action expert')
        except RegistryError as exc:
            self._release_checked.add(robot)
            if not self.cfg.release:
                # started from no release: an action expert started the same way names
                # its model's version, which no registry need know
                self.get_logger().debug(f'{who}: release {name} not looked up: {exc}')
                return
            self.get_logger().warning(
                f'{who}: its action expert serves release {name}, this world expert encodes '
                f'with {encoding}, and {name} cannot be looked up ({exc}): restart the world '
                f'expert with release {name}'
            )
            return
        self._release_wanted[robot] = (name, rel.world_dir, rel.world_digest, self._switch_calls)
        self.get_logger().info(
            f'{who}: its action expert serves release {name}; this world expert started on '
            f'{encoding}: loading {name}'
        )

    def _adopt(self, robot: str, name: str, model_dir: str, digest: str, calls: int) -> None:
        who = robot or 'the robot'
        if calls != self._switch_calls:
            del self._release_wanted[robot]
            self._release_checked.add(robot)
            self.get_logger().warning(
                f'{who}: a release switch arrived while loading release {name}: the switch '
                'decides what this robot is encoded with'
            )
            return
        self._finish_loads()
        if name not in self.models:
            load = self._loads.get(name)
            if load is None:
                req = SwitchRelease.Request(
                    phase='load', release=name, model_dir=model_dir, manifest_sha256=digest
                )
                start_load(self._loads, req, self._load_release, self.get_logger().info)
                return
            if load.state != FAILED:
                return  # still loading
            del self._release_wanted[robot]
            self._release_checked.add(robot)
            self.get_logger().warning(
                f'{who}: could not load release {name} ({load.error}): its frames stay '
                f'encoded with {self.robot_release.get(robot)}'
            )
            return
        with self._wake:  # the encoder thread applies it before its next batch
            self._release_replaced.add(self._pending_use.get(robot, self.robot_release[robot]))
            self._pending_use[robot] = name
            self._wake.notify()
        del self._release_wanted[robot]
        self._release_checked.add(robot)
        self.get_logger().info(f'{who}: encoding with release {name}, as its action expert')

    def _drop_unused(self) -> None:
        """Once adopted releases serve: the models they replaced that no robot uses are let
        go (the one the parameters named, typically; never one a release manager loaded)."""
        with self._wake:
            if self._pending_use:
                return  # not applied yet
            used = set(self.robot_release.values())
            dropped = [k for k in self._release_replaced if k not in used and k in self.models]
            for k in dropped:
                del self.models[k]
            self.expert = self.models[self.robot_release[self.robots[0]]]
            self.fleet_encoder.expert = self.expert
        self._release_replaced = set()
        if dropped:
            self.get_logger().info(f'unloaded {", ".join(dropped)}: no robot uses it')

    def _finish_loads(self) -> None:
        """Loads that finished become loadable models (on the executor's thread)."""
        for name, load in list(self._loads.items()):
            if load.state == LOADED and name not in self.models:
                self.models[name] = load.result

    def _load_release(self, model_dir: str, digest: str):
        """On the load thread: verify, load and warm up a release's world expert; it must
        write what the robots' rings hold (shape, dtype) from the same camera views."""
        if digest:
            verify_release_dir(model_dir, digest)
        cfg = self.cfg
        expert = load_world_expert(model_dir, cfg.precision, device=cfg.device)
        expert.output_on_device = self.expert.output_on_device
        spec, served = expert.spec, self.expert.spec
        if (tuple(spec.shape), spec.dtype) != (tuple(served.shape), served.dtype):
            raise ValueError(
                f'its representation is {list(spec.shape)} {spec.dtype}, the rings hold '
                f'{list(served.shape)} {served.dtype}: a restart, not a switch'
            )
        if (tuple(spec.view_names), bool(spec.prompt)) != (
            tuple(served.view_names),
            bool(served.prompt),
        ):
            raise ValueError(
                f'it reads the views {list(spec.view_names)} (prompt: {bool(spec.prompt)}), '
                f'the served one {list(served.view_names)} (prompt: {bool(served.prompt)}): '
                'a restart, not a switch'
            )
        if cfg.cuda_graphs:
            enable_cuda_graphs(expert, tuple(range(1, cfg.batch.max_size + 1)))
        torch.set_num_threads(cfg.num_threads)
        # paced: a round of batch sizes, then as long again idle (the served model keeps
        # its CPU); as many encodes as an activation's warm-up
        sizes = tuple(range(1, self.window.max_size + 1))
        self._torchscript(expert, sizes)
        paced(max(1, cfg.warmup_requests // len(sizes)), lambda: expert.warmup(1, sizes))
        return expert

    # hot path -----------------------------------------------------------------
    def _on_joint_state(self, robot: str, msg: JointState) -> None:
        try:
            q = self._joints.map(msg.name, msg.position).copy()
            # by stamp (the frozen-camera check compares the arm at two pictures' stamps);
            # an unstamped driver's states are taken as of their arrival
            self.encoders[robot].joint_state(convert.stamp_to_ns(msg.header.stamp) or wall_ns(), q)
        except JointStateError:
            pass  # bad joint states are rejected and counted by the action expert and harness

    def _on_subtask(self, robot: str, msg: ActiveSubtask) -> None:
        text = msg.subtask.text
        if len(text) > MAX_PROMPT_CHARS or '\0' in text:
            self.rejected_subtasks += 1
            self.get_logger().warning(
                f'rejected active subtask{_of(robot)}: {len(text)} characters '
                f'(at most {MAX_PROMPT_CHARS}, no NUL)',
                throttle_duration_sec=1.0,
            )
            return
        self._prompts[robot] = text

    def _on_image(self, robot: str, view: str, msg: Image) -> None:
        primary = view == self.views[0]
        if primary:  # the camera rate is the primary view's
            self._frame_rates[robot].tick(time.monotonic())
        stamp_ns = convert.stamp_to_ns(msg.header.stamp)
        encoder = self.encoders[robot]
        try:
            encoder.check(msg.encoding, msg.height, msg.width, msg.step, msg.data, stamp_ns)
        except ImageError as exc:
            self.quiet.warning(
                f'frame {robot} {exc.reason}', f'rejected camera frame{_of(robot)}: {exc}'
            )
            return
        if primary:  # the camera's period sets an auto TTL
            fresh = self.freshness[robot]
            fresh.observe(stamp_ns)
            encoder.max_age_ns = fresh.ttl_ms * 1e6
        frame = Frame(
            msg.encoding,
            msg.height,
            msg.width,
            msg.step,
            msg.data,
            stamp_ns,
            msg,
            view,
            prompt=self._prompts.get(robot, ''),
        )
        sync = self._syncs.get(robot)
        if sync is not None:  # several views: wait for the set within the tolerance
            views = sync.put(view, stamp_ns, frame)
            if views is None:
                return
            frame = views[self.views[0]]
            frame.others = {v: views[v] for v in self.views[1:]}
        self.encoder.timer.add('capture_to_queued', (wall_ns() - frame.stamp_ns) / 1e6)
        with self._wake:
            self.window.put(robot, frame, time.monotonic())
            self._wake.notify()

    def _encode_loop(self) -> None:
        torch.set_num_threads(self.cfg.num_threads)  # per-thread in OpenMP builds
        # a larger CPU share than the rest: the encode is what the readers' TTL is spent on
        self.encoder_nice_error = request_nice(self.cfg.encoder_nice)
        self._encoder_scheduled.set()
        while True:
            with self._wake:
                while self._running:
                    due = self.window.due_in(time.monotonic())
                    if due == 0.0:
                        break
                    self._wake.wait(due)  # None: until a frame arrives
                if not self._running:
                    return
                batch = self.window.take()
                # a commit applies between batches (one model per encode), under the lock
                # a confirm takes to decide which models no robot uses
                for robot, release in self._pending_use.items():
                    self.encoders[robot].use(self.models[release])
                    self.robot_release[robot] = release
                    self.switched_at[robot] = time.time()
                    self._status_due = True  # the gates learn the version at the next timer
                self._pending_use = {}
            try:
                results = self.fleet_encoder.encode(batch)
            except Exception as exc:  # never let one batch kill the encoder: counted, logged
                self.thread_errors.record(exc, 'world_encoder')
                continue
            for robot, frame, out in results:
                if isinstance(out, ImageError):
                    self.quiet.warning(
                        f'frame {robot} {out.reason}', f'rejected camera frame{_of(robot)}: {out}'
                    )
                elif isinstance(out, CacheError):
                    self.cache_write_failures += 1
                    self.quiet.error(
                        f'not cached {robot}', f'representation{_of(robot)} not cached: {out}'
                    )
                elif self._running:  # not while shutting down: the context may be gone
                    self._pubs[robot].publish(self._descriptor(robot, frame.source, out))
                    self.encoder.timer.add(
                        'capture_to_published', (wall_ns() - frame.stamp_ns) / 1e6
                    )

    def _descriptor(self, robot: str, msg: Image, out) -> RepresentationDescriptor:
        e = out.entry
        cache = self.caches[robot]
        d = RepresentationDescriptor()
        d.header.stamp = msg.header.stamp
        d.header.frame_id = msg.header.frame_id
        d.robot = robot
        d.key, d.model_version = e.key, e.version
        object_of = getattr(cache, 'object_of', None)  # mooncake: the store object
        d.backend = cache.backend
        d.segment = object_of(e) if object_of else getattr(cache, 'segment', '')
        d.checksum = e.checksum
        d.slot, d.sequence, d.epoch = e.slot, e.sequence, e.epoch
        d.shape, d.dtype = list(e.shape), e.dtype
        d.views = list(self.views)
        d.encode_s = out.encode_ms / 1e3
        d.ttl_ms = self.freshness[robot].ttl_ms
        return d

    def _status(self) -> WorldExpertStatus:
        encs = list(self.encoders.values())
        now = time.monotonic()
        # the slowest camera: one robot's dead camera must not hide in an average
        slowest, rate = min(
            ((r, m.rate(now)) for r, m in self._frame_rates.items()), key=lambda x: x[1]
        )
        expected = self.cfg.expected_camera_hz
        level, message = OK, 'encoding'
        if not self.ready:
            level, message = WARN, 'not active'
        elif self.thread_errors.total:
            level, message = (
                WARN,
                f'{self.thread_errors.total} exceptions survived: {self.thread_errors.latest()}',
            )
        elif rate < 0.5 * expected:
            level, message = (
                WARN,
                f'camera{_of(slowest)} at {rate:.1f} Hz, expected {expected:.0f} Hz',
            )
        frames = sum(e.frames for e in encs)
        hits = sum(e.hits for e in encs)
        distinct = frames - hits
        rejected: dict[str, int] = {}
        for e in encs:
            for k, v in e.rejected.items():
                rejected[k] = rejected.get(k, 0) + v
        for sync in self._syncs.values():
            for view, n in sync.missing.items():
                if n:
                    rejected[f'view_missing:{view}'] = rejected.get(f'view_missing:{view}', 0) + n
        return WorldExpertStatus(
            level=level,
            message=message,
            active=self.ready,
            model_version=self.encoder.expert.version,
            views=list(self.views),
            cache_backend=self.cache.backend if self.cache is not None else '',
            camera_rate_hz=rate,
            expected_camera_hz=expected,
            frames=frames,
            world_calls=self.fleet_encoder.world_calls,  # the experts' own counts: the truth
            cache_hits=hits,
            calls_per_distinct_frame=(
                self.fleet_encoder.world_calls / distinct if distinct else float('nan')
            ),
            encode_timeouts=sum(e.timeouts for e in encs),
            frames_superseded=self.window.superseded,
            rejected_frames=sum(rejected.values()),
            # frames by reason, and subtask texts refused as prompts (active_subtask)
            rejected=convert.reason_counts(
                {**rejected, 'active_subtask': self.rejected_subtasks}
                if self.rejected_subtasks
                else rejected
            ),
            frozen_unjudged=sum(e.frozen_camera.unjudged for e in encs),
            per_robot=[
                RobotEncoding(
                    robot=r,
                    frames=e.frames,
                    world_calls=e.world_calls,
                    cache_hits=e.hits,
                    calls_per_distinct_frame=e.calls_per_frame(),
                    rejected_frames=sum(e.rejected.values()),
                    release=self.robot_release.get(r, ''),
                    model_version=e.expert.version,
                    camera_period_ms=self.freshness[r].camera.period_ms,
                    ttl_ms=self.freshness[r].ttl_ms,
                )
                for r, e in self.encoders.items()
            ]
            if self.fleet
            else [],
            batch_mean=self.fleet_encoder.batch_mean,
            thread_errors=convert.reason_counts(self.thread_errors.snapshot()),
            latency=[convert.latency_stats(k, s) for k, s in self.encoder.timer.summary().items()],
            release=self.robot_release.get(self.robots[0], ''),
            loaded_releases=sorted(self.models),
            rss_mb=rss_mb(),
        )


# the longest subtask text taken as a prompt (a tokenizer truncates it to the model's
# prompt length anyway; a megabyte string is an error upstream, not a prompt)
MAX_PROMPT_CHARS = 2000


def _of(robot: str) -> str:
    return f' of {robot}' if robot else ''


def main(args=None) -> None:
    """Stand-alone process (multi-process mode): shared-memory cache, self-activating."""
    run_node(WorldExpertNode, args, lifecycle=True)


if __name__ == '__main__':
    main()
