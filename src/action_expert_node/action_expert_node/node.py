"""Action expert: a 50 Hz clock -> cache read -> action expert -> raw JointTrajectory.

A managed (lifecycle) node. configure: read the parameters, verify the manifest, load
the model, attach to the cache; activate: warm up, start the tick clock; deactivate:
stop it and publish a braking hold. Each tick never waits for the world expert: it uses
the newest representation that passes the version, TTL and seqlock checks; the chunk
leaves stamped for when it applies, with velocities, blended into the running one and
bounded inside the joint limits (``wam_core.serving.chunk_stream``). Without a usable
representation the robot keeps executing the last valid chunk for the open-loop budget,
then brakes to a hold (hold_last_action).

The tick runs on its own thread on absolute deadlines (``DeadlineTimer``), not from the
executor: subscriptions, diagnostics and services run on the executor's thread and
never delay it by more than a GIL hand-off. An action expert slower than a period (a π0
on a CPU) decodes off the tick instead (``decode_mode``, ``OffTickDecoder``): the tick
publishes each chunk once it is ready, stamped for when it applies, and the robot keeps
executing the running chunk meanwhile. Its typed status goes to ~/status with every
/diagnostics report.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import torch
from rclpy.lifecycle import Node as LifecycleNode
from rclpy.lifecycle import State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from wam_core.cache.factory import open_cache_reader
from wam_core.cache.freshness import (
    initial_ttl_ms,
    is_auto,
    read_on_the_stamping_clock,
    valid_announced_ttl,
)
from wam_core.cache.mooncake import RemoteRepresentation, object_name
from wam_core.cache.protocol import CacheError
from wam_core.common.clock import WallClock, wall_ns, wall_s
from wam_core.common.config import ActionExpertParams
from wam_core.common.params import ConfigError
from wam_core.common.paths import resolve_path
from wam_core.common.robot import robot_of_namespace
from wam_core.common.status import ERROR, OK, WARN
from wam_core.common.thread_errors import ThreadErrors
from wam_core.control.joint_state import JointStateError, JointStateMapper
from wam_core.control.limits import ChunkRejected
from wam_core.control.trajectory import Trajectory
from wam_core.models.manifest import ManifestError
from wam_core.models.registry import enable_cuda_graphs, load_action_expert
from wam_core.releases.loading import (
    FAILED,
    LOADED,
    LOADING,
    BackgroundLoad,
    paced,
    rss_mb,
    start_load,
)
from wam_core.releases.registry import (
    RegistryError,
    look_up,
    manifest_digest,
    verify_release_dir,
)
from wam_core.serving.action_ticker import ActionTicker, Descriptor
from wam_core.serving.batched_decode import too_slow_for_an_instance
from wam_core.serving.chunk_stream import ChunkStream
from wam_core.serving.deadline_timer import DeadlineTimer
from wam_core.serving.interpreter import freeze_heap, shorten_gil_switch_interval
from wam_core.serving.latency import LatencyWindow, RateMeter, StageTimer
from wam_core.serving.off_tick_decoder import OffTickDecoder
from wam_interfaces.msg import ActionExpertStatus, ActiveSubtask, RepresentationDescriptor
from wam_interfaces.srv import SwitchRelease
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.metrics import NodeMetrics
from wam_util.params import NodeParams
from wam_util.quiet_log import QuietLog
from wam_util.release_query import ReleaseQuestion
from wam_util.status import TypedStatus

# how often a (re)started action expert looks whether it has asked the world expert
# which release it encodes its robot with (see _check_release)
RELEASE_CHECK_S = 0.2


class ActionExpertNode(LifecycleNode):
    def __init__(
        self,
        name: str = 'action_expert',
        cache=None,
        model=None,
        hosted: bool = False,
        reports_as: str = '',
        **kwargs,
    ):
        """``cache``/``model``: a shared cache reader and an already loaded model (a
        single-process bring-up, an instance's robots). ``hosted``: an action-expert
        instance (``instance``) drives this robot's ticks from its one clock (no clock of
        its own, decodes on the tick) and decides when it serves; until then it keeps up
        with its inputs and publishes nothing, statuses included. ``reports_as``: the node
        name its statuses carry (an instance's standby node reports as the robot's
        action_expert)."""
        super().__init__(name, **kwargs)
        self._shared_model = model
        self.hosted = hosted
        self._standby_role = bool(reports_as)
        # whether it ticks and publishes: always for a node of its own; an instance's
        # robot from when the instance gives it the robot (its own, or a takeover)
        self.serves_robot = not hosted
        self._parked = None  # mooncake: a standby's newest descriptor, not yet fetched
        self.params = NodeParams(self, ActionExpertParams)
        self.cfg: ActionExpertParams | None = None
        self.metrics: NodeMetrics | None = None
        self._shared_cache = cache
        self._remote = False
        # the robot this expert drives: it reads only that robot's representations
        self.robot = robot_of_namespace(self.get_namespace())
        self.cache = None
        self.ttl_ms = math.nan  # the freshness bound in force (set at configure)
        self._auto_ttl = False
        self.ticker = None
        self.decoder: OffTickDecoder | None = None  # decode_mode async: decodes off the tick
        self.decode_mode = 'tick'
        self._warm_p99 = math.nan  # the warm-up's prepare + decode p99, ms
        self.control_ticks = 0  # ticks of the 50 Hz clock (async: decodes are fewer)
        self.wall_clock: WallClock | None = None  # from activate
        # exceptions the tick, decode and fetch threads survived (tracebacks in the log)
        self.thread_errors = ThreadErrors(lambda m: self.get_logger().error(m))
        self._tick_clock: DeadlineTimer | None = None
        self._diag_timer = None
        self._subs = []
        self._pub = None
        self.stream: ChunkStream | None = None
        self.timer_stats = StageTimer('cache_read', 'prepare', 'forward', 'publish', 'tick')
        self.period = LatencyWindow()
        self.wake = LatencyWindow()  # deadline -> tick start, ms
        self.serving = LatencyWindow()  # deadline -> chunk published, ms
        self.lead = 1  # periods between a tick's deadline and its chunk's stamp
        self.stamp_lead = 1  # the last chunk's: periods between its decode's grid point and stamp
        self.late_stamps = 0  # chunks published after their own stamp (must stay 0)
        # camera stamp -> first chunk that used its representation
        self.obs_to_action = LatencyWindow()
        self.repr_age = LatencyWindow()  # age of the representation each chunk used, ms
        self.fetch = LatencyWindow()  # mooncake: descriptor -> tensor in the local ring, ms
        self._last_fire = None
        self.rejected = {}
        self.last_reason = ''
        # degraded ticks and rejected inputs: the first at once, then one line a second
        self.quiet = QuietLog(self.get_logger())
        self._out_rate = RateMeter()
        self._joint_rate = RateMeter()
        self._repr_rate = RateMeter()
        self.ready = False
        # model releases loaded beside the served one (``switch_release``), by name
        self._loads: dict[str, BackgroundLoad] = {}
        self._switch_srv = None
        # a standby's confirmed release, or one adopted from a peer instance, applied on
        # its instance's clock (between_ticks);
        # the lock keeps that apart from the executor's switch phases
        self._pending_confirm: str | None = None
        self._switch_lock = threading.Lock()
        # A (re)started action expert decodes with the release its parameters name, which
        # need not be the one the world expert encodes its robot with since a switch: once
        # it drives its robot it asks the world expert and switches to that release (from
        # the registry; an instance first asks a peer that drives the robot, see instance)
        self._release_questions: list[ReleaseQuestion] = []
        self._release_timer = None
        self._release_state = ''  # '' (to ask) | adopting | checked
        self._release_wanted: tuple[str, str, str] | None = None  # name, dir, sha256
        # the release being adopted, lone or for an instance (its status names none
        # meanwhile: a node restarted beside it asks again), and the switch_release calls
        # that change something: a release manager's switch meanwhile ends the adoption
        self._adopting: str | None = None
        self._adopt_calls = 0
        self._switch_calls = 0
        self.diagnostics = NodeDiagnostics(self, reports_as=reports_as)
        # in the robot's namespace, not the node's: an instance's standby node that took
        # the robot over reports where the robot's action_expert does
        self.status = TypedStatus(
            self,
            self.diagnostics,
            'action expert',
            ActionExpertStatus,
            'action_expert/status',
            self._status,
        )

    # lifecycle ----------------------------------------------------------------
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.cfg = cfg = self.params.read()
            torch.set_num_threads(cfg.num_threads)
            model_dir = resolve_path(cfg.model_dir)
            model = self._shared_model
            if model is None:
                model = load_action_expert(
                    model_dir, cfg.precision, device=cfg.device, robot=cfg.robot.description()
                )
                if cfg.cuda_graphs:
                    enable_cuda_graphs(model)
            manifest, spec = model.manifest, model.spec
            digest = manifest_digest(model_dir)
            if tuple(spec.joint_names) != tuple(cfg.robot.joint_names):
                raise ValueError(
                    f'the model commands the joints {list(spec.joint_names)}, '
                    f'robot.joint_names are {list(cfg.robot.joint_names)}'
                )
            self.cache = (
                self._shared_cache
                if self._shared_cache is not None
                else open_cache_reader(cfg.repr_cache, self.robot)
            )
        except (ManifestError, CacheError, ConfigError, OSError, ValueError) as exc:
            self.get_logger().error(f'configure failed: {exc}')
            return TransitionCallbackReturn.FAILURE
        self.manifest = manifest
        self.world_version = spec.world_version
        self._remote = hasattr(self.cache, 'prefetch')
        # the freshness bound: a number, or auto (the world expert announces it per robot)
        self._auto_ttl = is_auto(cfg.repr_cache.ttl_ms)
        # (a reader opened here starts with it; a shared cache keeps its creator's)
        self.ttl_ms = initial_ttl_ms(cfg.repr_cache.ttl_ms)
        self.ticker = ActionTicker(
            model,
            self.cache,
            self.world_version,
            len(spec.joint_names),
            spec.conditioning_dim,
            cfg.timeout_ms,
            cfg.control.period_s,  # a model trained at another period is resampled onto it
        )
        self.ticker.tag = cfg.release or manifest.version
        # where each release this node has served or loaded came from (directory, manifest
        # sha256): a switch_release status tells a restarted peer instance which to load
        self._sources = {self.ticker.tag: (model_dir, digest)}
        if self._remote:
            self.cache.thread_errors = self.thread_errors  # the fetch thread's
            self.cache.on_fetch_ms = self.fetch.add
            self.cache.on_ready = lambda e: self.ticker.set_descriptor(
                Descriptor(e.key, e.version, e.slot, e.epoch)
            )
        self.stream = ChunkStream(
            cfg.robot.joint_names,
            cfg.joint_limits,
            cfg.control.period_s,
            cfg.degrade.max_open_loop_s,
            cfg.motion.blend_points,
            cfg.motion.feasibility_scale,
            cfg.control.max_command_deviation,
            cfg.control.contact_noise_fraction,
        )
        self.joints = JointStateMapper(cfg.robot.joint_names)
        self._pub = self.create_lifecycle_publisher(
            JointTrajectory, 'action_expert/raw_chunk', qos.EVENTS
        )
        self._subs = [
            self.create_subscription(JointState, 'joint_states', self._on_joint_state, qos.SENSOR),
            self.create_subscription(
                RepresentationDescriptor,
                'world_expert/representation',
                self._on_descriptor,
                qos.EVENTS,
            ),
            # latched: an expert that (re)starts mid-task still gets the active subtask
            self.create_subscription(
                ActiveSubtask,
                'harness/active_subtask',
                self._on_subtask,
                qos.LATCHED,
            ),
        ]
        self.subtask_text = '(none: default conditioning)'
        # the robot's action expert answers action_expert/switch_release; its standby on
        # another instance its own, so a release manager switches both (a takeover after
        # a switch then decodes the new version's representations with the new model)
        self._switch_srv = self.create_service(
            SwitchRelease,
            f'{"action_expert_standby" if self._standby_role else "action_expert"}/switch_release',
            self._on_switch_release,
        )
        # the world expert beside it (a lone robot) or in the root namespace (a fleet)
        names = {self.resolve_service_name('world_expert/switch_release')}
        names.add('/world_expert/switch_release')
        self._release_questions = [
            ReleaseQuestion(self.create_client(SwitchRelease, n), robot=self.robot)
            for n in sorted(names)
        ]
        self._adopting = None
        self._release_state, self._release_wanted = '', None
        self._release_timer = self.create_timer(RELEASE_CHECK_S, self._check_release)
        self.metrics = NodeMetrics(self, cfg.metrics_port)
        for stage, window in (
            ('tick', self.timer_stats.stages['tick']),
            ('period', self.period),
            ('fetch', self.fetch),
            ('representation_age', self.repr_age),
            ('observation_to_action', self.obs_to_action),
        ):
            self.metrics.latency(stage, window)
        self.metrics.status('action_expert', self.status)
        self.metrics.start()
        # diagnostics from configure to cleanup: a configured, inactive expert says so
        self._diag_timer = self.create_timer(self.diagnostics.TIMER_S, self._diagnostics_due)
        resampled = (
            f' at {spec.period_s * 1e3:g} ms, resampled onto {cfg.control.period_s * 1e3:g} ms'
            if abs(spec.period_s - cfg.control.period_s) > 1e-9
            else ''
        )
        self.get_logger().info(
            f'action expert {manifest.name} version {manifest.version} loaded from {model_dir}; '
            f'accepts world version {self.world_version}, chunk {spec.horizon}'
            f'x{len(spec.joint_names)}{resampled}'
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        t0 = time.perf_counter()
        warm = self.ticker.warmup(
            self.cfg.warmup_requests, self.ticker.model.spec.representation_shape
        )
        if self.hosted:
            # An instance decodes its robots on its one tick
            steady = warm[3:] if len(warm) > 6 else warm
            slow = too_slow_for_an_instance(steady, self.cfg.timeout_ms)
            if self.cfg.decode_mode == 'async' or slow:
                why = slow or 'decode_mode is async'
                self.get_logger().error(
                    f'activate failed: an instance decodes its robots on its one tick, and '
                    f'{why}: serve it with an action_expert per robot'
                )
                return TransitionCallbackReturn.FAILURE
            self._warm_p99 = float(np.percentile(steady, 99)) if steady else math.nan
            self.decode_mode, self.decoder = 'tick', None
            self.ticker.timeout_ms = self.cfg.timeout_ms
        else:
            self._choose_decode_mode(warm)
        freeze_heap()  # no collection walks the model's objects during a tick
        self.wall_clock = WallClock()  # monotonic deadlines -> wall stamps, by the live offset
        if not self.hosted:
            self._tick_clock = DeadlineTimer(
                self.cfg.control.period_s,
                self._tick,
                'action_expert_tick',
                self.cfg.realtime_priority,
                self.thread_errors,
            )
        self.diagnostics.start()
        self.ready = True
        res = super().on_activate(state)  # activates the publisher: then the first tick
        if self.decoder is not None:
            self.decoder.start()
        if self.hosted:
            self.get_logger().info(
                f"ready on its instance's clock: warm-up {self.cfg.warmup_requests} passes in "
                f'{(time.perf_counter() - t0) * 1e3:.0f} ms'
            )
            return res
        self._tick_clock.start()
        if self._tick_clock.realtime_error:
            self.get_logger().warning(
                f'tick thread at normal priority: {self._tick_clock.realtime_error}; '
                'the period jitters more on a loaded machine'
            )
        self.get_logger().info(
            f'ready: warm-up {self.cfg.warmup_requests} passes in '
            f'{(time.perf_counter() - t0) * 1e3:.0f} ms; ticking every '
            f'{self.cfg.control.period_s * 1e3:.1f} ms'
            + (f' at SCHED_FIFO {self.cfg.realtime_priority}' if self._tick_clock.realtime else '')
            + (
                f'; decoding off the tick ({self._warm_p99:.1f} ms p99 in warm-up)'
                if self.decoder is not None
                else ''
            )
        )
        self.diagnostics.publish()  # at once: after a restart the harness waits on it
        return res

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self.ready = False
        if not self._stop_clock():
            # the tick (or a decode) still runs and may still write the chunk stream: no
            # hold from here on top of it; the transition fails with the reason logged
            return TransitionCallbackReturn.FAILURE
        here = self.ticker.joint_positions
        # leave the robot braking to rest, not mid-chunk (unless another instance drives it)
        if here is not None and self.serves_robot:
            traj = self.stream.hold(wall_s() + self.cfg.control.period_s, here)
            self._pub.publish(self._message(traj))
        return super().on_deactivate(state)

    def _choose_decode_mode(self, warm_ms: list[float]) -> None:
        """tick or async (decode_mode; auto: async when the warm-up's decode p99, its first
        passes left out, exceeds the tick budget timeout_ms)."""
        steady = warm_ms[3:] if len(warm_ms) > 6 else warm_ms
        self._warm_p99 = float(np.percentile(steady, 99)) if steady else math.nan
        mode = self.cfg.decode_mode
        if mode == 'auto':
            mode = 'async' if self._warm_p99 > self.cfg.timeout_ms else 'tick'
        self.decode_mode = mode
        self.decoder = None
        self.ticker.timeout_ms = self.cfg.timeout_ms
        if mode == 'async':
            self.ticker.timeout_ms = math.inf  # slower than a period by design
            self.decoder = OffTickDecoder(
                self.ticker, self.cfg.num_threads, errors=self.thread_errors
            )

    def _stop_clock(self) -> bool:
        """Stop the tick and the off-tick decode; False (logged) if either outlived 2 s.
        The handle is kept then: the thread still runs, and a later stop may find it done."""
        stopped = True
        if self._tick_clock is not None:
            if self._tick_clock.stop():
                self._tick_clock = None
            else:
                self.get_logger().error('the tick did not finish within 2 s of the stop')
                stopped = False
        if self.decoder is not None:
            if self.decoder.stop():
                self.decoder = None
            else:
                self.get_logger().error('the decode did not finish within 2 s of the stop')
                stopped = False
        return stopped

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        ok = self.release()
        return TransitionCallbackReturn.SUCCESS if ok else TransitionCallbackReturn.FAILURE

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        ok = self.release()
        return TransitionCallbackReturn.SUCCESS if ok else TransitionCallbackReturn.FAILURE

    def release(self) -> bool:
        """Stop serving and close the cache; False if the tick or a decode would not stop
        (the cache is then left to it)."""
        self.ready = False
        if not self._stop_clock():
            return False
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        # what configure created goes with cleanup (its mirror): a second configure must
        # not find the first one's subscriptions still delivering
        if self._diag_timer is not None:
            self.destroy_timer(self._diag_timer)
        self._diag_timer = None
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        if self._switch_srv is not None:
            self.destroy_service(self._switch_srv)
        self._switch_srv = None
        if self._release_timer is not None:
            self.destroy_timer(self._release_timer)
        self._release_timer = None
        for question in self._release_questions:
            self.destroy_client(question.client)
        self._release_questions = []
        self._loads = {}
        if self._pub is not None:
            self.destroy_lifecycle_publisher(self._pub)
        self._pub = None
        if self.cache is not None and self._shared_cache is None:
            self.cache.close()
        self.cache = None
        return True

    # model releases -------------------------------------------------------------
    def _on_switch_release(self, request, response):
        """SwitchRelease phases (see the .srv): load beside the served model, arm it to take
        over at its first representation, confirm, abort, status."""
        if request.phase != 'status':
            self._switch_calls += 1
        try:
            with self._switch_lock:
                ok, message = self._switch_phase(request)
        except Exception as exc:  # a bad request never takes the node down
            ok, message = False, f'{type(exc).__name__}: {exc}'
        return self._switch_response(request.release, response, ok, message)

    def _switch_phase(self, req) -> tuple[bool, str]:
        t = self.ticker
        if t is None:
            return False, 'not configured'
        name, phase = req.release, req.phase
        if phase == 'status':
            return True, 'status'
        if not name:
            return False, 'no release named'
        if phase in ('arm', 'abort'):  # another switch: a pending confirm is moot
            self._pending_confirm = None
        if phase == 'load':
            if name == t.tag or (t.previous is not None and t.previous.tag == name):
                return True, f'{name} is already loaded'
            if req.model_dir:
                self._sources[name] = (resolve_path(req.model_dir), req.manifest_sha256)
            return start_load(self._loads, req, self._load_release, self.get_logger().info)
        if phase == 'arm':
            if name == t.tag:
                t.disarm()
                return True, f'{name} is serving'
            if t.previous is not None and t.previous.tag == name:  # a rollback: no load
                t.arm(t.previous.model, t.previous.version, name)
            else:
                load = self._loads.get(name)
                if load is None or load.state != LOADED:
                    state = load.state if load else 'not loaded'
                    return False, f'{name} is {state}: load it first'
                t.arm(load.result, load.result.spec.world_version, name)
            self.get_logger().info(
                f'release {name} armed: it serves from its first representation of world '
                f'version {t.armed.version}'
            )
            # at once, before the world expert switches: the gate must hear that this
            # expert also decodes for the new version before it sees that version
            if self.serves_robot:
                self.diagnostics.publish()
            return True, f'{name} armed'
        if phase == 'confirm':
            if name != t.tag and self._standby_armed(name):
                # a standby ticks nothing, so nothing switched it: its instance's clock
                # makes the armed model the served one (between_ticks), and from then on
                # it rolls back, aborts and switches again as the robot's primary does
                self._pending_confirm = name
                self._loads = {k: v for k, v in self._loads.items() if v.state == LOADING}
                return True, f'{name} confirmed: this standby serves it from its next clock tick'
            if name != t.tag:
                return False, f'{name} is not serving ({t.tag} is)'
            replaced = t.previous.tag if t.previous is not None else ''
            t.confirm()
            # what was loaded for this or an earlier switch is let go (the ticker holds the
            # served model); a load still under way finishes for the manager to use
            self._loads = {k: v for k, v in self._loads.items() if v.state == LOADING}
            self.get_logger().info(
                f'release {name} confirmed' + (f'; {replaced} unloaded' if replaced else '')
            )
            return True, f'{name} confirmed'
        if phase == 'abort':
            if name == t.tag:
                return False, f'{name} is serving: switch to another release instead'
            if t.armed is not None and t.armed.tag == name:
                t.disarm()
            self._loads.pop(name, None)
            if t.previous is not None and t.previous.tag == name:
                t.previous = None
            return True, f'{name} unloaded'
        return False, f'unknown phase {phase!r} (load, arm, confirm, abort, status)'

    def between_ticks(self) -> None:
        """On the instance's clock thread, for a node that does not drive its robot (a
        standby, or a restarted primary adopting its peer's release): a confirmed or
        adopted release it holds armed becomes the one it serves (one that drives the
        robot switches on its own tick, as a primary does); the replaced model is let go."""
        if self._pending_confirm is None or self.ticker is None:
            return
        if not self._switch_lock.acquire(blocking=False):
            return  # a switch phase runs on the executor: the next tick
        try:
            name, t = self._pending_confirm, self.ticker
            if name is None:
                return
            if t.tag != name and not self.serves_robot:
                t.promote_armed(name)
            done = t.tag == name
            if done:
                t.confirm()
                self._pending_confirm = None
        finally:
            self._switch_lock.release()
        if done:
            role = 'standby' if self._standby_role else 'node'
            self.get_logger().info(f'release {name} confirmed on this {role}')

    def adopt_release(
        self, name: str, model_dir: str, digest: str, while_serving: bool = False
    ) -> str:
        """Bring this node onto the release ``name`` that the node which kept running
        serves the robot with (this one restarted with another): load it beside the served
        model (verified against ``digest``) and arm it. A node that does not drive its robot
        (on an instance) is made to serve it by its instance's clock (``between_ticks``);
        one that drives it (``while_serving``: a lone action expert, or an instance's node
        that drives its robot) switches at its first representation of the release's
        version, as after a release manager's arm. Called again until it answers
        ``serving`` (then the replaced model is let go); otherwise ``loading``, ``armed``
        or ``failed: <reason>``."""
        with self._switch_lock:
            state = self._adopt_state(name, model_dir, digest, while_serving)
            self._adopting = name if state in ('loading', 'armed') else None
            return state

    def _adopt_state(self, name: str, model_dir: str, digest: str, while_serving: bool) -> str:
        """adopt_release's step (under the switch lock)."""
        t = self.ticker
        if t is None:
            return 'failed: not configured'
        if self._adopting != name:  # a new adoption: switches from here on end it
            self._adopt_calls = self._switch_calls
        elif self._adopt_calls != self._switch_calls:
            return 'failed: a release switch arrived meanwhile: it decides'
        if t.tag == name:
            if self._adopting == name:
                t.confirm()  # (on an instance, between_ticks has)
            return 'serving'
        if self.serves_robot and not while_serving:
            return 'failed: it drives its robot (the release manager switches it)'
        if t.armed is not None and t.armed.tag == name:
            if not self.serves_robot:
                self._pending_confirm = name
            return 'armed'
        load = self._loads.get(name)
        if load is None or load.state == FAILED:
            if load is not None:
                return f'failed: {load.error}'
            req = SwitchRelease.Request(
                phase='load', release=name, model_dir=model_dir, manifest_sha256=digest
            )
            ok, message = self._switch_phase(req)
            return 'loading' if ok else f'failed: {message}'
        if load.state != LOADED:
            return load.state
        t.arm(load.result, load.result.spec.world_version, name)
        self._loads.pop(name, None)  # the ticker holds it now
        if self.serves_robot:  # the gate hears at once that it decodes the new version too
            self.diagnostics.publish()
        else:
            self._pending_confirm = name
        return 'armed'

    # a restart after a switch (a lone action expert, or an instance's robot) ---------
    def _check_release(self) -> None:
        """On the executor, while active and driving its robot: ask the world expert once
        which release it encodes this robot with; for another than this node's, load that
        release's action expert from the registry, arm it (it serves from its first
        representation) and confirm it once it serves. From then on the release manager
        switches both. An instance's node asks once its instance gives it the robot: before
        that, the instance brings it onto the release of a peer that drives the robot;
        with no live peer (a one-instance fleet, or both instances restarted) it drove the
        robot with its launch release, whose version the world expert no longer wrote, and
        the gate stopped the robot on the mismatch until someone restarted the instance
        with the live release."""
        if not self.ready or self._release_state == 'checked':
            return
        if self._release_state == 'adopting':  # (on, whoever drives the robot meanwhile)
            self._adopt_step()
            return
        if not self.serves_robot:  # an instance's node that does not drive its robot (yet)
            return
        for question in self._release_questions:
            if question.ask(self._on_release_answer):
                return

    def _on_release_answer(self, res) -> None:
        name = res.active_release if res.success else ''
        if not name or self._release_state:
            return  # not configured, or adopting a release itself: asked again
        t = self.ticker
        if t is None or name in (t.tag, t.armed.tag if t.armed is not None else None):
            self._release_state = 'checked'
            return
        try:
            rel = look_up(name, self.cfg.releases_db)
        except RegistryError as exc:
            self._release_state = 'checked'
            # (a world expert started from a model directory names its model's version:
            # nothing to say when this model decodes that version)
            if self.cfg.release or name != t.version:
                self.get_logger().warning(
                    f'the world expert encodes this robot with release {name}, this action '
                    f'expert decodes with {t.tag}, and {name} cannot be looked up ({exc}): '
                    f'restart it with release {name}'
                )
            return
        self._release_wanted = (name, rel.action_dir, rel.action_digest)
        self._release_state = 'adopting'
        self.get_logger().info(
            f'the world expert encodes this robot with release {name}; this action expert '
            f'started on {t.tag}: loading {name}'
        )
        self._adopt_step()  # the load starts now (its status names no release meanwhile)

    def _adopt_step(self) -> None:
        """The adoption the world expert's answer asked for, one step per check
        (``adopt_release``)."""
        name, model_dir, digest = self._release_wanted
        state = self.adopt_release(name, model_dir, digest, while_serving=True)
        if state in ('loading', 'armed'):
            return
        self._release_state, self._release_wanted = 'checked', None
        if state == 'serving':
            self.get_logger().info(f'on release {name}, as the world expert')
        else:
            self.get_logger().warning(f'release {name} not adopted: {state[len("failed: ") :]}')

    def _standby_armed(self, name: str) -> bool:
        armed = self.ticker.armed
        return self._standby_role and armed is not None and armed.tag == name

    def _load_release(self, model_dir: str, digest: str):
        """On the load thread: verify, load and warm up a release's action expert; it must
        fit what this node serves (the robot, the representation, the decode mode)."""
        if digest:
            verify_release_dir(model_dir, digest)
        cfg = self.cfg
        model = load_action_expert(
            model_dir, cfg.precision, device=cfg.device, robot=cfg.robot.description()
        )
        spec, served = model.spec, self.ticker.model.spec
        if tuple(spec.joint_names) != tuple(cfg.robot.joint_names):
            raise ValueError(
                f'the model commands the joints {list(spec.joint_names)}, '
                f'robot.joint_names are {list(cfg.robot.joint_names)}'
            )
        if tuple(spec.representation_shape) != tuple(served.representation_shape):
            raise ValueError(
                f'its representation is {list(spec.representation_shape)}, the served '
                f'one {list(served.representation_shape)}: a restart, not a switch'
            )
        torch.set_num_threads(cfg.num_threads)
        # paced: a pass, then as long again idle, so the served model keeps its CPU
        warm = paced(
            cfg.warmup_requests,
            lambda: self.ticker.warmup(1, spec.representation_shape, model=model)[0],
        )
        steady = warm[3:] if len(warm) > 6 else warm
        # The median, not the p99 the start-up uses: these passes run beside the served
        # model and the rest of the host, so their tail is the machine's preemption, not
        # the model's cost (a 0.4 ms decode measured 15 ms p99 here under a full stack).
        p50 = float(np.median(steady)) if steady else 0.0
        if self.decoder is None and p50 > cfg.timeout_ms:
            raise ValueError(
                f'its decode p50 {p50:.1f} ms exceeds the tick budget {cfg.timeout_ms:g} ms '
                '(this node decodes on the tick): a restart, not a switch'
            )
        return model

    def _switch_response(self, name: str, response, ok: bool, message: str):
        t = self.ticker
        response.success, response.message = ok, message
        response.active_release = t.tag if t and self._adopting is None else ''
        if t is not None:
            source = self._sources.get(t.tag, ('', ''))
            response.active_model_dir, response.active_manifest_sha256 = source
        response.previous_release = t.previous.tag if t and t.previous else ''
        load = self._loads.get(name)
        if t is not None and name == t.tag:
            response.state = 'serving'
        elif t is not None and t.armed is not None and t.armed.tag == name:
            response.state = 'armed'
        elif load is not None:
            response.state = load.state
        elif t is not None and t.previous is not None and t.previous.tag == name:
            response.state = 'loaded'
        else:
            response.state = 'idle'
        if load is not None and load.state == FAILED:
            response.message = f'{message}: {load.error}' if ok else message
        response.switched_at = t.switched_at_ns * 1e-9 if t is not None and name == t.tag else 0.0
        response.rss_mb = rss_mb()
        response.load_peak_rss_mb = load.peak_rss_mb if load is not None else 0.0
        counted = t.switch_degraded if t is not None else {}
        response.switch_degraded_ticks = -1 if counted is None else sum(counted.values())
        response.switch_baseline_degraded_ticks = t.switch_baseline if t is not None else 0
        response.switch_degraded_reasons = ', '.join(
            f'{k}: {v}' for k, v in (counted or {}).items()
        )
        return response

    # inputs -------------------------------------------------------------------
    def _reject(self, what: str, exc: Exception) -> None:
        self.rejected[what] = self.rejected.get(what, 0) + 1
        self.quiet.warning(f'rejected {what}', f'rejected {what}: {exc}')

    def _on_joint_state(self, msg: JointState) -> None:
        self._joint_rate.tick(time.monotonic())
        try:
            self.ticker.set_joint_state(self.joints.map(msg.name, msg.position))
        except JointStateError as exc:
            self._reject('joint_state', exc)

    def _on_subtask(self, msg: ActiveSubtask) -> None:
        try:
            # (an expert without a conditioning vector ignores it: the world expert's
            # prompt carries the subtask to it)
            self.ticker.set_subtask(np.asarray(msg.embedding, dtype=np.float32))
        except ValueError as exc:
            self._reject('active_subtask', exc)
            return
        self.subtask_text = msg.subtask.text

    def _fetch_refused(self) -> dict[str, int]:
        return self.cache.refused_counts() if self._remote else {}

    def _on_descriptor(self, msg: RepresentationDescriptor) -> None:
        if msg.robot != self.robot:  # a miswired topic must not steer this arm
            self._reject(
                'descriptor',
                ValueError(f'representation of robot {msg.robot!r}, this is {self.robot!r}'),
            )
            return
        if self._auto_ttl and msg.ttl_ms != self.ttl_ms and msg.ttl_ms != 0.0:
            # 0: a world expert that announces none (the initial bound stays)
            if not valid_announced_ttl(msg.ttl_ms):
                self._reject('descriptor', ValueError(f'announced TTL {msg.ttl_ms!r} ms'))
                return
            self.ttl_ms = msg.ttl_ms
            self.cache.set_ttl_ms(msg.ttl_ms)
        self._repr_rate.tick(time.monotonic())
        if self._remote:  # mooncake: fetch now, off the tick; the ticker hears when ready
            rep = RemoteRepresentation(
                # the object name from this robot and the key, never from the message:
                # a descriptor cannot point this arm at another robot's object
                object_name(self.robot, msg.key),
                msg.key,
                msg.model_version,
                convert.stamp_to_ns(msg.header.stamp),
                tuple(msg.shape),
                msg.dtype,
                msg.checksum,
                msg.epoch,
            )
            if self._standby_role and not self.serves_robot:
                # a warm standby keeps the newest descriptor and fetches it when it takes
                # the robot over: a fetch costs the host ~1.2 ms of CPU, and standbys
                # fetching every frame doubled a fleet's fetches. (A primary fetches
                # before it serves: it is claimed once it has a representation.)
                self._parked = rep
                return
            self.cache.prefetch(rep)
            return
        if self.cache is not None and 0 < self.cache.capacity <= msg.slot:
            self._reject(
                'descriptor',
                ValueError(f'slot {msg.slot} outside the ring of {self.cache.capacity}'),
            )
            return
        self.ticker.set_descriptor(Descriptor(msg.key, msg.model_version, msg.slot, msg.epoch))

    # the 50 Hz tick -------------------------------------------------------------
    def _tick(self, deadline: float) -> None:
        """One tick for ``deadline`` (monotonic s), on the tick clock's thread."""
        t0 = self.tick_started(deadline)
        if self.decoder is not None:
            self._tick_off_tick_decode(deadline, t0)
            return
        self.serve_tick(self.ticker.tick(), deadline, t0)

    def serve_tick(self, res, deadline: float, t0: float) -> None:
        """Publish what this tick's decode gave (an instance decodes its robots together
        and serves each one's result here)."""
        self._serve(res, deadline, self.ticker.joint_state_used, self.lead, t0, deadline)

    def start_serving(self) -> None:
        """An instance gives this robot to this node: ticks from the next deadline on, its
        statuses from the executor's next diagnostics turn, five a second at first (a
        takeover: the robot's gate hears its action expert again well within its silence
        timeout; building one here would delay the instance's other robots' tick)."""
        self._last_fire = None  # the idle spell is not a period
        if self.stream is not None:  # another instance drove it meanwhile: from the robot
            self.stream.tracker.reset()
        self.serves_robot = True
        parked, self._parked = self._parked, None
        if parked is not None:  # mooncake: the newest representation, fetched now
            self.cache.prefetch(parked)
        self.diagnostics.start()

    def chunks_reach_subscribers(self) -> bool:
        """Whether the chunk publisher has matched every subscription to its topic that
        this process has discovered, and at least one (the robot's gate)."""
        known = self.count_subscribers(self._pub.topic_name)
        return self._pub.get_subscription_count() >= max(1, known)

    def stop_serving(self) -> None:
        """The robot goes back to its primary instance: this node stops publishing."""
        self.serves_robot = False

    def tick_started(self, deadline: float) -> float:
        """A tick's bookkeeping (wake-up lateness, period, count); its perf_counter start."""
        t0 = time.perf_counter()
        now = time.monotonic()
        self.wake.add((now - deadline) * 1e3)
        if self._last_fire is not None:
            self.period.add((now - self._last_fire) * 1e3)
        self._last_fire = now
        self.control_ticks += 1
        return t0

    def _tick_off_tick_decode(self, deadline: float, t0: float) -> None:
        """decode_mode async: publish a decode that finished (stamped from its own grid
        point, for when it applies), then ask for the next one at this grid point. While a
        decode is in flight the robot executes the running chunk; one that overruns the
        open-loop budget brakes it to a hold, as a missing representation does."""
        done = self.decoder.take()
        if done is not None:
            # periods since the decode's grid point, and the usual lead beyond this tick
            elapsed = round((deadline - done.grid_s) / self.cfg.control.period_s)
            lead = elapsed + self.lead
            self._serve(done.result, done.grid_s, done.joint_state, lead, t0, deadline)
            self.decoder.submit(deadline)  # after the publish, which it would only delay
            return
        self.decoder.submit(deadline)  # the first decode, or one after an idle spell
        measured = self.ticker.joint_positions
        cmd = self.stream.command
        stamp = self.wall_clock.to_wall(deadline) + self.lead * self.cfg.control.period_s
        if (
            measured is None
            or cmd is None  # the first decode is on its way; the harness starts stopped
            or len(cmd.times) == 1  # already braking to a hold: the next decode decides
            or self.stream.within_open_loop(stamp)
        ):
            return
        self.ticker.degraded['decode_overrun'] = self.ticker.degraded.get('decode_overrun', 0) + 1
        traj = self.stream.degraded(self.wall_clock.to_wall(deadline), self.lead, measured)
        self._publish(traj, None, 'decode_overrun', t0, deadline)

    def _serve(self, res, grid: float, measured, lead: int, t0: float, deadline: float) -> None:
        """Publish, at the tick for ``deadline``, what a decode for the grid point ``grid``
        gave (monotonic s; the same in tick mode): its chunk, stamped ``lead`` periods
        after the grid point, or the degraded outcome."""
        for stage, ms in res.stages.items():
            self.timer_stats.add(stage, ms)
        if measured is None:
            self._note_degraded(res.reason)
            return
        tick_s = self.wall_clock.to_wall(grid)  # the grid point, wall clock (the live offset)
        traj, reason = None, res.reason
        if res.kind == 'chunk' and lead > len(res.positions) - 2:
            # decoded so slowly that the chunk's rows end before its stamp could apply
            reason = 'decode_outlived_chunk'
            self.ticker.discard(reason)
        elif res.kind == 'chunk' and not read_on_the_stamping_clock(
            res.obs_stamp_ns, tick_s, res.repr_age_ms, (time.monotonic() - grid) * 1e3
        ):
            # the wall clock stepped between the read and this stamp: the next read judges
            # the representation on the new clock (and refuses it until a new frame)
            reason = 'clock_stepped'
            self.ticker.discard(reason)
        elif res.kind == 'chunk':
            try:
                traj = self.stream.chunk(res.positions, tick_s, lead, measured)
                self.stamp_lead = lead
            except ChunkRejected as exc:
                reason = f'infeasible_chunk ({exc.reason})'
                self.ticker.discard('infeasible_chunk')
        if traj is None:
            traj = self.stream.degraded(self.wall_clock.to_wall(deadline), self.lead, measured)
        self._publish(traj, res, reason, t0, deadline)

    def _publish(self, traj, res, reason: str, t0: float, deadline: float) -> None:
        t1 = time.perf_counter()
        if traj is not None:
            self._pub.publish(self._message(traj))
            sent = time.monotonic()
            self.serving.add((sent - deadline) * 1e3)
            if len(traj.times) > 1 and self.wall_clock.to_wall(sent) > traj.start:
                self.late_stamps += 1
            self._out_rate.tick(sent)
        if res is not None and res.kind == 'chunk' and reason == res.reason:
            self.repr_age.add(res.repr_age_ms)
            if res.new_representation:
                self.obs_to_action.add((wall_ns() - res.obs_stamp_ns) / 1e6)
            self.last_reason = ''
        else:
            self._note_degraded(reason)
        t2 = time.perf_counter()
        self.timer_stats.add('publish', (t2 - t1) * 1e3)
        self.timer_stats.add('tick', (t2 - t0) * 1e3)

    def _message(self, traj: Trajectory) -> JointTrajectory:
        """A chunk keeps its stamp (when point 0 applies). A braking hold goes out stamped 0,
        "from now", with its end as time_from_start: the controller never rejects it as
        ending in the past, however late it arrives."""
        if len(traj.times) == 1:
            now = wall_s()
            traj = Trajectory(
                0.0,
                np.maximum(traj.times + (traj.start - now), 1e-3),
                traj.positions,
                traj.velocities,
            )
        return convert.timed_trajectory(self.cfg.robot.joint_names, traj)

    def _update_lead(self) -> None:
        """Stamp chunks far enough ahead that point 0 is not past when the robot gets them:
        the measured deadline -> publish latency p99 plus a margin, in whole periods."""
        p99 = self.serving.summary()['p99']
        if math.isfinite(p99):
            period_ms = self.cfg.control.period_s * 1e3
            wanted = max(1, math.ceil((p99 + self.cfg.motion.lead_margin_ms) / period_ms))
            # down by at most one period at a time: the next chunk's stamp is then never
            # before the previous chunk's, which would hand the robot back an older plan
            self.lead = max(wanted, self.lead - 1)

    def _diagnostics_due(self) -> None:
        # On the executor's thread, not the tick's: building the status (percentiles,
        # ~30 key/values, ~1 ms of Python) only delays the tick by a GIL hand-off. An
        # instance's robot it does not serve says nothing: its instance's status does.
        if self.serves_robot and self.diagnostics.due():
            self._update_lead()
            self.diagnostics.publish()

    def _note_degraded(self, reason: str) -> None:
        self.last_reason = reason
        self.quiet.warning(
            f'degraded {reason}', f'degraded ({self.cfg.degrade_on_timeout}): {reason}'
        )

    def expected_chunk_hz(self) -> float:
        """50 Hz on the tick; off the tick, one chunk every ceil(decode p99 / period)
        periods (the warm-up's p99 until decodes are measured)."""
        period = self.cfg.control.period_s
        if self.decoder is None:
            return 1.0 / period
        p99 = self.decoder.decode_ms.summary()['p99']
        if not math.isfinite(p99):
            p99 = self._warm_p99
        periods = max(1, math.ceil(p99 / (period * 1e3))) if math.isfinite(p99) else 1
        return 1.0 / (periods * period)

    def _status(self) -> ActionExpertStatus:
        t = self.ticker
        now = time.monotonic()
        hz = self.expected_chunk_hz()
        out_rate = self._out_rate.rate(now)
        hits = self.cache.stats.hits if self.cache is not None else 0
        refused = sum(self.cache.stats.refused.values()) if self.cache is not None else 0
        js_rate, js_hz = self._joint_rate.rate(now), self.cfg.expected_joint_state_hz
        rep_rate, rep_hz = self._repr_rate.rate(now), self.cfg.expected_representation_hz
        level, message = OK, 'serving'
        if not self.ready:
            level, message = WARN, 'not active'
        elif self.last_reason == 'version_mismatch':
            level, message = ERROR, f'world model version differs from {t.version}'
        elif self._tick_clock is not None and self._tick_clock.errors:
            level, message = (
                WARN,
                f'{self._tick_clock.errors} ticks failed: {self._tick_clock.last_error}',
            )
        elif self.thread_errors.total:
            level, message = (
                WARN,
                f'{self.thread_errors.total} exceptions survived: {self.thread_errors.latest()}',
            )
        elif self.decoder is not None and self.decoder.in_flight_s() > 1.0:
            level, message = (
                WARN,
                f'a decode has been running for {self.decoder.in_flight_s():.1f} s',
            )
        elif self.wall_clock is not None and self.wall_clock.stepped_recently():
            level, message = (
                WARN,
                f'the wall clock stepped by {self.wall_clock.last_step_s * 1e3:+.0f} ms '
                '(chunks are stamped by the new one)',
            )
        elif self.last_reason:
            level, message = WARN, f'degraded: {self.last_reason}'
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
            convert.latency_stats('wake', self.wake.summary()),
            convert.latency_stats('serving', self.serving.summary()),
            convert.latency_stats('obs_to_action', self.obs_to_action.summary()),
            convert.latency_stats('repr_age', self.repr_age.summary()),
        ]
        if self._remote:
            latency.append(convert.latency_stats('fetch', self.fetch.summary()))
        if self.decoder is not None:
            latency.append(convert.latency_stats('decode', self.decoder.decode_ms.summary()))
            if level == OK:
                message = f'serving, decoding off the tick (chunks at {out_rate:.1f} Hz)'
        return ActionExpertStatus(
            level=level,
            message=message,
            active=self.ready,
            world_version_accepted=t.version,
            active_subtask=self.subtask_text,
            ticks=self.control_ticks,
            decode_mode=self.decode_mode,
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
            rejected_inputs=convert.reason_counts(
                {
                    **self.rejected,
                    # mooncake: fetched tensors refused (size, checksum, failed, superseded)
                    **{f'fetch_{k}': v for k, v in self._fetch_refused().items()},
                }
            ),
            latency=latency,
            degraded_outcomes=convert.reason_counts(self.stream.outcomes),
            stamp_lead_periods=self.stamp_lead,
            late_stamps=self.late_stamps,
            thread_errors=convert.reason_counts(self.thread_errors.snapshot()),
            clock_steps=self.wall_clock.steps if self.wall_clock else 0,
            last_clock_step_ms=self.wall_clock.last_step_s * 1e3 if self.wall_clock else 0.0,
            skipped_deadlines=self._tick_clock.skipped if self._tick_clock is not None else 0,
            release=t.tag,
            armed_release=t.armed.tag if t.armed is not None else '',
            previous_release=t.previous.tag if t.previous is not None else '',
            world_versions_loaded=sorted(
                {t.version}
                | ({t.armed.version} if t.armed is not None else set())
                | ({t.previous.version} if t.previous is not None else set())
            ),
            release_switches=t.switches,
            mixed_version_ticks=t.mixed_version_ticks,
            rss_mb=rss_mb(),
            ttl_ms=self.ttl_ms,
        )


def main(args=None) -> None:
    """Stand-alone process (multi-process mode): shared-memory cache, self-activating."""
    shorten_gil_switch_interval()  # the tick must not queue behind executor callbacks
    run_node(ActionExpertNode, args, lifecycle=True)


if __name__ == '__main__':
    main()
