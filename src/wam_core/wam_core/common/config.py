"""Each node's parameters, as one schema per node (see ``params`` for how they are read).

``config/wam.yaml`` has one block per node, named as the node, plus a ``/**`` block
for what several nodes share: the robot's joint names, the control period and the
representation cache's backend, name and TTL. The defaults here are the values of
that file (a test holds them equal), so a node started without it behaves the same.
Units: seconds, radians and metres unless a name says ``_ms`` or ``_hz``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .params import ConfigError, param, per_joint, section
from .robot import TABLETOP_ARM, JointLimit, RobotDescription, description_of_file

PRECISIONS = ('auto', 'bf16', 'fp16', 'fp32')
WORLD_PRECISIONS = (*PRECISIONS, 'int8')  # int8: dynamic quantization, CPU (models/precision.py)
CACHE_BACKENDS = ('inprocess', 'shm', 'mooncake', 'cuda_ipc')


def camera_topic(view: str) -> str:
    """Where a robot publishes a camera view (relative to its namespace): front on
    camera/image_raw (the name a single-camera robot uses), another <view> on
    <view>_camera/image_raw."""
    return 'camera/image_raw' if view == 'front' else f'{view}_camera/image_raw'


# ----------------------------------------------------------------------------- shared
@dataclass
class RobotConfig:
    joint_names: list[str] = param(
        list(TABLETOP_ARM.joint_names),
        "the robot's joints in command order, as its sensor_msgs/JointState names them",
    )
    description_file: str = param(
        '',
        "the robot's URDF (joints, limits, kinematic chain), with its ros2_control "
        'joint_limits.yaml beside it; empty: the shipped tabletop arm',
    )

    def description(self) -> RobotDescription:
        """The robot description this configuration names (ConfigError if unreadable)."""
        return description_of_file(self.description_file)

    def check_limits(self, limits: Mapping[str, JointLimit]) -> None:
        """ConfigError unless the joints are the description's commanded joints, in its
        order, and no configured limit is wider than the URDF's (a gate configured looser
        than the robot's own limits would forward what the robot must not do)."""
        desc = self.description()
        if list(self.joint_names) != list(desc.joint_names):
            raise ConfigError(
                f'robot.joint_names {list(self.joint_names)} are not the commanded joints of '
                f'the robot description {list(desc.joint_names)} '
                f'({self.description_file or "the shipped tabletop arm"})'
            )
        for name, lim in limits.items():
            urdf = desc.limits[name]
            wider = [
                what
                for what, ok in (
                    ('lower', lim.lower >= urdf.lower - 1e-9),
                    ('upper', lim.upper <= urdf.upper + 1e-9),
                    ('velocity', lim.velocity <= urdf.velocity + 1e-9),
                )
                if not ok
            ]
            if wider:
                raise ConfigError(
                    f'joint_limits.{name}: {", ".join(wider)} wider than the URDF allows '
                    f'({urdf.lower:g}..{urdf.upper:g}, {urdf.velocity:g}/s)'
                )

    def validate(self) -> None:
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ConfigError(
                f'parameter robot.joint_names must be unique, non-empty names: {self.joint_names}'
            )


@dataclass
class ControlConfig:
    period_s: float = param(
        0.02,
        'control period, s: the action expert ticks every period (50 Hz) and chunk points '
        'are one period apart',
        min=0.001,
        max=1.0,
    )
    max_command_deviation: float = param(
        0.15,
        'a new chunk starts from the command the robot follows, unless the measured position '
        'is further than this from it (max over joints, rad or m): a stopped or blocked robot '
        'then restarts from where it is (the action expert and the harness gate alike)',
        min=1e-4,
        max=10.0,
    )
    contact_noise_fraction: float = param(
        0.01,
        "a measured position this share of a joint's range outside a limit is contact "
        'noise, clipped into the limits as a baseline; further out it is refused',
        min=0.0,
        max=0.2,
    )


@dataclass
class MooncakeConfig:
    master_address: str = param(
        '127.0.0.1:50051', "mooncake_master's RPC address, host:port (the world host)"
    )
    metadata_server: str = param(
        'http://127.0.0.1:8080/metadata',
        "the transfer engine's metadata service (mooncake_master's built-in HTTP server)",
    )
    local_hostname: str = param(
        '127.0.0.1', "the world expert's transfer-engine address (its host's address)"
    )
    reader_hostname: str = param(
        '127.0.0.1', "an action expert's transfer-engine address (the robot host's address)"
    )
    protocol: str = param(
        'tcp', 'transport: tcp here; rdma or efa in production', choices=('tcp', 'rdma', 'efa')
    )
    device_name: str = param('', 'RDMA/EFA device (NIC) name; empty for tcp')
    global_segment_mb: int = param(
        64, 'memory the world host lends the store for representations, MiB', min=1, max=1 << 20
    )
    local_buffer_mb: int = param(16, "each client's transfer buffer, MiB", min=1, max=1 << 20)
    objects_per_robot: int = param(
        64,
        "each robot's newest representations the world host keeps in the store (older "
        'ones are removed: a tick only wants the newest, and the store is bounded)',
        min=1,
        max=4096,
    )
    connect_timeout_s: float = param(
        15.0,
        'how long an expert keeps trying to join the store (its master may still be starting), s',
        min=0.0,
        max=600.0,
    )


@dataclass
class ReprCacheConfig:
    backend: str = param(
        'inprocess',
        'representation cache: inprocess (every node in one process) | shm (POSIX shared '
        'memory, one process per expert) | mooncake (the Mooncake Store, across hosts) | '
        'cuda_ipc (GPU)',
        choices=CACHE_BACKENDS,
    )
    ttl_ms: float | str = param(
        'auto',
        'oldest observation a reader uses, ms; the world expert refuses frames already older. '
        "auto: one camera period (measured from the stamps) plus the world expert's "
        'timeout_ms, announced per robot in each descriptor',
        min=0.1,
        max=60000.0,
        auto=True,
    )
    shm_name: str = param(
        'wam_repr',
        'shared-memory segment name under /dev/shm (shm; cuda_ipc keeps its sequence words there)',
    )
    cuda_device: int = param(
        0, 'CUDA device of the cuda_ipc ring (the writer allocates it there)', min=0, max=63
    )
    mooncake: MooncakeConfig = section(MooncakeConfig)

    def validate(self) -> None:
        if not self.shm_name or '/' in self.shm_name:
            raise ConfigError(
                f'parameter repr_cache.shm_name must be a plain name, got {self.shm_name!r}'
            )


@dataclass
class ReprCacheWriterConfig(ReprCacheConfig):
    capacity: int = param(
        512,
        'slots in the ring (the writer sizes it; readers take it from the segment)',
        min=1,
        max=65536,
    )


def check_device(device: str, cuda_graphs: bool) -> None:
    """The form of an expert's device setting (whether the device exists is the model
    loader's check, with the reason 'no CUDA device')."""
    if not re.fullmatch(r'cpu|cuda(:[0-9]+)?', device):
        raise ConfigError(f'parameter device must be cpu, cuda or cuda:N, got {device!r}')
    if cuda_graphs and device == 'cpu':
        raise ConfigError('parameter cuda_graphs needs a CUDA device (device: cuda)')


# ------------------------------------------------------------------------ world expert
@dataclass
class FrameChecksConfig:
    frozen_motion_rad: float = param(
        0.0005,
        'an identical frame again while the arm moved more than this between the stamps '
        'of that frame first and of the repeat (joint states at those stamps, max over '
        'joints, rad) is a frozen camera, refused; a static scene with a still arm repeats '
        'frames legitimately',
        min=0.0,
        max=3.2,
    )
    max_future_ms: float = param(
        100.0,
        'a frame stamped further in the future than this is refused (a clock jump or a '
        'skewed camera clock), ms',
        min=0.0,
        max=60000.0,
    )


@dataclass
class BatchConfig:
    max_size: int = param(
        4, 'frames of different robots encoded in one forward pass, at most', min=1, max=256
    )
    max_wait_us: int = param(
        2000,
        "the longest a robot's frame waits for other robots' frames to join its batch, us",
        min=0,
        max=1_000_000,
    )


@dataclass
class WorldExpertParams:
    """world_expert: camera frames -> encode once -> representation cache -> descriptor."""

    robot: RobotConfig = section(RobotConfig)
    repr_cache: ReprCacheWriterConfig = section(ReprCacheWriterConfig)
    model_dir: str = param(
        'models/world_expert',
        'world-expert model directory (manifest.json, config.json, weights); a relative '
        'path resolves against $WAM_ROOT',
    )
    release: str = param(
        '',
        'the release model_dir belongs to (its name in the release registry: the name a '
        "switch reports); empty: the model's version",
    )
    releases_db: str = param(
        '',
        'the release registry where a (re)started world expert finds the world expert of '
        "the release each robot's action expert serves; empty: $WAM_RELEASES_DB, else "
        'releases/releases.db in the workspace',
    )
    precision: str = param(
        'auto',
        "compute dtype; auto = bf16 on a GPU; on a CPU the model's choice: int8 for the ViT "
        '(its Linear layers quantized), else bf16 where the CPU computes it natively, '
        'else fp32',
        choices=WORLD_PRECISIONS,
    )
    device: str = param(
        'cpu', 'where the world expert computes: cpu | cuda | cuda:N (bf16 is the GPU baseline)'
    )
    cuda_graphs: bool = param(
        False,
        "capture each batch size's forward (1 .. batch.max_size) as a CUDA graph on activate "
        '(device cuda)',
    )
    torchscript: bool = param(
        True,
        'device cpu: run the forward as frozen TorchScript graphs (one per batch size, '
        "traced on activate), which hold no GIL, so the process's other threads do not "
        'stretch an encode; false: eager',
    )
    warmup_requests: int = param(
        50, 'encodes of a synthetic frame on activate, before serving', min=0, max=100000
    )
    timeout_ms: float = param(
        40.0,
        'an encode slower than this is counted as an encode timeout, ms',
        min=0.1,
        max=60000.0,
    )
    num_threads: int = param(
        1, 'torch intra-op threads (fixed, so p99 stays near p50)', min=1, max=256
    )
    encoder_nice: int = param(
        -10,
        "nice value of the encoder thread: a larger CPU share than the node's other threads "
        "(CFS weight about 9x at -10), never a core outright (0: the process's; without the "
        'privilege it keeps that, with a warning)',
        min=-20,
        max=19,
    )
    camera_topic: str = param(
        'camera/image_raw',
        "sensor_msgs/Image topic of the front view, relative to each robot's namespace",
    )
    view_topics: list[str] = param(
        [],
        "'view=topic' for the model's other views (default: <view>_camera/image_raw, "
        "relative to each robot's namespace)",
    )
    view_tolerance_ms: float = param(
        15.0,
        'frames of different views whose stamps lie this close form one observation, ms',
        min=0.0,
        max=1000.0,
    )
    robots: list[str] = param(
        [],
        'the robots (namespaces) this world expert serves: /<robot>/<camera_topic> in, a '
        "descriptor on /<robot>/world_expert/representation out; empty: the node's own "
        'namespace, one robot',
    )
    batch: BatchConfig = section(BatchConfig)
    frame_checks: FrameChecksConfig = section(FrameChecksConfig)
    expected_camera_hz: float = param(
        30.0, 'camera rate, Hz; the status warns below half of it', min=0.1, max=10000.0
    )
    metrics_port: int = param(
        0,
        'serve Prometheus metrics (latency histograms, the typed status) on this TCP port; 0: off',
        min=0,
        max=65535,
    )
    autostart: bool = param(
        True,
        'configure and activate on start (false when a launch file or a lifecycle '
        'manager drives the transitions)',
    )

    @property
    def traces_forward(self) -> bool:
        """Whether the world expert's forward runs as TorchScript graphs (a CPU only)."""
        return self.torchscript and self.device == 'cpu'

    def validate(self) -> None:
        check_device(self.device, self.cuda_graphs)
        if self.precision == 'int8' and self.device != 'cpu':
            raise ConfigError(
                f'parameter precision int8 runs on the CPU only; with device {self.device} '
                'set precision auto (bf16 there)'
            )
        names = [r.strip().strip('/') for r in self.robots]
        bad = [
            r
            for r in names
            if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*', r)
        ]
        if bad or len(set(names)) != len(names):
            raise ConfigError(
                f'parameter robots must be distinct ROS namespaces (robot1, lab/arm_2), '
                f'got {self.robots}'
            )
        self.robots = names
        for item in self.view_topics:
            view, sep, topic = item.partition('=')
            if not sep or not view.strip() or not topic.strip():
                raise ConfigError(f"parameter view_topics: 'view=topic' entries, got {item!r}")

    def topic_of(self, view: str) -> str:
        """The camera topic of a view (relative to the robot's namespace)."""
        for item in self.view_topics:
            name, _, topic = item.partition('=')
            if name.strip() == view:
                return topic.strip()
        return self.camera_topic if view == 'front' else camera_topic(view)


# ----------------------------------------------------------------------- action expert
@dataclass
class DegradeConfig:
    max_open_loop_s: float = param(
        0.1,
        'hold_last_action: a tick with no usable representation publishes nothing while '
        'the last valid chunk began at most this long ago (the robot keeps executing it); '
        'after that, a braking hold. Keep it well inside the chunk horizon, s',
        min=0.0,
        max=10.0,
    )


@dataclass
class MotionConfig:
    blend_points: int = param(
        3,
        'a new chunk blends into the running one over this many points (0: replaces it)',
        min=0,
        max=1000,
    )
    lead_margin_ms: float = param(
        3.0,
        'chunks are stamped on the control grid at least tick latency p99 + this ahead, ms '
        '(DDS delivery and the controller picking it up)',
        min=0.0,
        max=1000.0,
    )
    feasibility_scale: float = param(
        0.97,
        'chunks are bounded to this share of the velocity and acceleration limits before '
        'they leave, so the harness gate (at the full limits) has nothing to change',
        min=0.1,
        max=1.0,
    )


@dataclass
class ActionExpertParams:
    """action_expert: a 50 Hz timer -> cache read -> action chunk."""

    robot: RobotConfig = section(RobotConfig)
    control: ControlConfig = section(ControlConfig)
    repr_cache: ReprCacheConfig = section(ReprCacheConfig)
    model_dir: str = param(
        'models/action_expert',
        'action-expert model directory (manifest.json, config.json, weights); a relative '
        'path resolves against $WAM_ROOT',
    )
    release: str = param(
        '',
        'the release model_dir belongs to (its name in the release registry: the name a '
        "switch reports); empty: the model's version",
    )
    releases_db: str = param(
        '',
        'the release registry where a (re)started action expert (alone, or on an instance '
        'once it drives its robot) finds the action expert of the release the world expert '
        'encodes its robot with; empty: '
        '$WAM_RELEASES_DB, else releases/releases.db in the workspace',
    )
    precision: str = param(
        'fp32', 'compute dtype (its matrices are small: fp32 is as fast)', choices=PRECISIONS
    )
    device: str = param('cpu', 'where the action expert computes: cpu | cuda | cuda:N')
    cuda_graphs: bool = param(
        False, 'capture prepare and decode as CUDA graphs on activate (device cuda)'
    )
    warmup_requests: int = param(
        50, 'full ticks on a synthetic representation on activate', min=0, max=100000
    )
    timeout_ms: float = param(
        15.0,
        'a tick slower than this discards its chunk (a degraded tick: hold_last_action), ms; '
        'also the budget decode_mode auto holds the warm-up against',
        min=0.1,
        max=60000.0,
    )
    decode_mode: str = param(
        'auto',
        'tick: read, prepare and decode on the 50 Hz tick; async: decode off the tick at its '
        'own pace, each chunk stamped for when it applies (an action expert slower than a '
        'period); auto: async when the warm-up decode p99 exceeds timeout_ms',
        choices=('auto', 'tick', 'async'),
    )
    degrade_on_timeout: str = param(
        'hold_last_action',
        'what a tick without a usable representation does: keep executing the last valid '
        'chunk for degrade.max_open_loop_s, then brake to a hold',
        choices=('hold_last_action',),
    )
    degrade: DegradeConfig = section(DegradeConfig)
    motion: MotionConfig = section(MotionConfig)
    joint_limits: dict[str, JointLimit] = per_joint(
        JointLimit,
        TABLETOP_ARM.limits,
        'limits chunks are bounded to (at motion.feasibility_scale) before they leave',
    )
    num_threads: int = param(
        1, 'torch intra-op threads (fixed, so p99 stays near p50)', min=1, max=256
    )
    realtime_priority: int = param(
        50,
        'SCHED_FIFO priority of the tick thread, as ros2_control gives its update loop '
        '(0: normal scheduling; without the privilege it falls back with a warning)',
        min=0,
        max=99,
    )
    expected_joint_state_hz: float = param(
        100.0, 'joint_states rate, Hz; the status warns below half of it', min=0.1, max=10000.0
    )
    expected_representation_hz: float = param(
        30.0, 'representation rate, Hz; the status warns below half of it', min=0.1, max=10000.0
    )
    metrics_port: int = param(
        0,
        'serve Prometheus metrics (latency histograms, the typed status) on this TCP port; 0: off',
        min=0,
        max=65535,
    )
    autostart: bool = param(
        True,
        'configure and activate on start (false when a launch file or a lifecycle '
        'manager drives the transitions)',
    )

    def validate(self) -> None:
        check_device(self.device, self.cuda_graphs)
        for name, limit in self.joint_limits.items():
            limit.check(name)
        self.robot.check_limits(self.joint_limits)


@dataclass
class InstanceBatchConfig:
    max_size: int = param(
        16, "robots' decodes in one forward pass, at most (a model with decode_batch)",
        min=1, max=256,
    )  # fmt: skip


@dataclass
class ActionInstanceParams:
    """action_instance: one process, one 50 Hz clock, several robots' action experts."""

    instance_name: str = param(
        '', "this instance's name in the heartbeats (/action_instances); empty: the node's"
    )
    robots: list[str] = param(
        [],
        'the robots (namespaces) this instance is the primary for: a /<robot>/action_expert '
        "node each, with the action_expert section's parameters",
    )
    standby_robots: list[str] = param(
        [],
        "a peer instance's robots this one takes over when that instance falls silent "
        '(a warm /<robot>/action_expert_standby node each, publishing nothing until then)',
    )
    peers: list[str] = param(
        [],
        'instances to hear from once before driving its own robots after a start (a '
        'restarted instance must not drive a robot its standby still drives)',
    )
    takeover_after_s: float = param(
        0.1,
        "a robot's primary instance silent this long (no heartbeat) hands it to its standby, "
        "s; below the gate's safety.chunk_hold_s, so the robot only brakes if it is late",
        min=0.02,
        max=60.0,
    )
    startup_grace_s: float = param(
        5.0,
        "waiting for peers (and for a standby robot's primary that never came up) ends "
        'after this long, s',
        min=0.0,
        max=600.0,
    )
    handback_settle_s: float = param(
        3.0,
        "a robot its standby drives is claimed back once this instance's chunk publisher "
        'has matched every subscriber it knows of (the gate) for this long, s: the gate '
        'discovers a restarted publisher later than the publisher discovers the gate',
        min=0.0,
        max=60.0,
    )
    batch: InstanceBatchConfig = section(InstanceBatchConfig)
    realtime_priority: int = param(
        50, 'SCHED_FIFO priority of the clock thread (0: normal scheduling)', min=0, max=99
    )

    def validate(self) -> None:
        # an empty entry is nothing (a launch file cannot pass an empty typed list)
        self.standby_robots = [r for r in self.standby_robots if r.strip()]
        self.peers = [p.strip() for p in self.peers if p.strip()]
        names = [r.strip().strip('/') for r in (*self.robots, *self.standby_robots)]
        if not all(names):
            raise ConfigError(f'parameter robots has an empty name: {self.robots}')
        if len(set(names)) != len(names):
            raise ConfigError(
                f'parameters robots {self.robots} and standby_robots {self.standby_robots} '
                'name a robot twice'
            )
        self.robots = [r.strip().strip('/') for r in self.robots]
        self.standby_robots = [r.strip().strip('/') for r in self.standby_robots]


# ----------------------------------------------------------------------------- harness
@dataclass
class SafetyConfig:
    required_nodes: list[str] = param(
        ['world_expert', 'action_expert'],
        'nodes whose ERROR/STALE status or silence stops the robot; a relative name is in '
        "the robot's namespace, an absolute one (/world_expert) is shared by the fleet",
    )
    silence_timeout_s: float = param(
        3.0,
        'a required node silent on /diagnostics this long stops the robot, s',
        min=0.1,
        max=600.0,
    )
    startup_timeout_s: float = param(
        60.0,
        'a required node that has not reported this long after the gate started stops the '
        'robot with an error; until then the gate waits for it, the robot held (a bring-up '
        'loads and warms up models for seconds), s',
        min=0.1,
        max=3600.0,
    )
    chunk_hold_s: float = param(
        0.15,
        'no raw chunk for this long sends one braking hold, as does the last forwarded '
        "chunk's horizon running out; above the action expert's degrade.max_open_loop_s "
        '(it is silent while the robot executes its last chunk), s',
        min=0.001,
        max=600.0,
    )
    chunk_timeout_s: float = param(
        0.25, 'no raw chunk for this long stops the robot, s', min=0.001, max=600.0
    )
    holdoff_s: float = param(
        0.5, 'a stop clears once everything is OK for this long, s', min=0.0, max=600.0
    )
    watchdog_period_s: float = param(
        0.01,
        "the safety monitor's watchdog period (silence, chunk gaps, horizons run out), s: "
        'what a stop waits for at most beyond its cause',
        min=0.001,
        max=1.0,
    )
    diagnostics_queue_depth: int = param(
        50,
        '/diagnostics messages queued for the safety monitor (a burst of statuses from a '
        'fleet must not push out the one that says ERROR)',
        min=1,
        max=100000,
    )

    def validate(self) -> None:
        if self.chunk_timeout_s <= self.chunk_hold_s:
            raise ConfigError(
                f'parameter safety.chunk_timeout_s ({self.chunk_timeout_s}) must exceed '
                f'safety.chunk_hold_s ({self.chunk_hold_s}): the hold comes before the stop'
            )
        if not all(n.strip().lstrip('/') for n in self.required_nodes):
            raise ConfigError(
                f'parameter safety.required_nodes must be node names, got {self.required_nodes}'
            )
        # kept as written: a relative name resolves in the robot's namespace, an absolute
        # one ('/world_expert', a fleet's shared world expert) does not
        self.required_nodes = [n.strip() for n in self.required_nodes]


@dataclass
class PlannerConfig:
    use_llm: bool = param(True, 'ask the LLM planner first (the rules answer when it cannot)')
    llm_url: str = param(
        'http://localhost:30000/v1', 'OpenAI-compatible server (SGLang, llama.cpp): base URL'
    )
    llm_model: str = param('default', 'model name sent to the LLM server')
    timeout_s: float = param(
        2.0, 'per-request timeout, s; a plan gives up after twice this', min=0.01, max=600.0
    )
    schema_mode: str = param(
        'json_schema',
        'how the request constrains the reply: json_schema (OpenAI, SGLang) | json_object '
        '(llama.cpp)',
        choices=('json_schema', 'json_object'),
    )
    hedge_after_s: float = param(
        1.0,
        'an LLM slower than this is not waited for: the rules plan at once, and its plan, '
        'if it comes, is cached for the next time the task is asked, s (0: wait for it)',
        min=0.0,
        max=600.0,
    )
    breaker_cooldown_s: float = param(
        30.0,
        'after repeated failures the LLM is not called for this long, s',
        min=0.0,
        max=86400.0,
    )
    plan_cache: bool = param(
        True,
        'reuse a validated LLM plan for the same or a near-identical instruction (embedding '
        'similarity >= 0.97, same model)',
    )
    similarity_threshold: float = param(
        0.6,
        'a word the rules do not know is read as the nearest vocabulary word when their '
        'all-MiniLM-L6-v2 cosine similarity is at least this; below, the instruction is refused',
        min=0.0,
        max=1.0,
    )


@dataclass
class TaskConfig:
    subtask_duration_s: float = param(
        2.0, 'how long each subtask conditions the action expert, s', min=0.01, max=3600.0
    )


@dataclass
class EmbeddingConfig:
    redis_url: str = param(
        '', 'Redis URL for an embedding cache shared across processes (empty: in-process only)'
    )


@dataclass
class HarnessParams:
    """harness: the clamping gate and the safety stop, the only road to the robot (no
    planner code in its process: the task manager is its own node)."""

    robot: RobotConfig = section(RobotConfig)
    control: ControlConfig = section(ControlConfig)
    joint_limits: dict[str, JointLimit] = per_joint(
        JointLimit, TABLETOP_ARM.limits, 'limits the clamping gate enforces on every chunk'
    )
    safety: SafetyConfig = section(SafetyConfig)
    metrics_port: int = param(
        0,
        'serve Prometheus metrics (latency histograms, the typed status) on this TCP port; 0: off',
        min=0,
        max=65535,
    )

    def validate(self) -> None:
        for name, limit in self.joint_limits.items():
            limit.check(name)
        self.robot.check_limits(self.joint_limits)


@dataclass
class TaskManagerParams:
    """task_manager: ExecuteTask goals and ``instruction`` (relative: a fleet robot's is
    /<robot>/instruction) -> a plan -> one conditioning subtask at a time (its own
    process: the LLM client and MiniLM stay away from the gate)."""

    planner: PlannerConfig = section(PlannerConfig)
    task: TaskConfig = section(TaskConfig)
    embedding: EmbeddingConfig = section(EmbeddingConfig)
    metrics_port: int = param(
        0,
        'serve Prometheus metrics (latency histograms, the typed status) on this TCP port; 0: off',
        min=0,
        max=65535,
    )


@dataclass
class TaskManagersParams:
    """task_managers: one process hosting several robots' task managers."""

    robots: list[str] = param(
        [],
        'the robots (namespaces) whose task managers this process hosts: a '
        "/<robot>/task_manager node each, with the task_manager section's parameters",
    )


# ----------------------------------------------------------------------- robot side
@dataclass
class SimRobotParams:
    """sim_robot: the MuJoCo tabletop on ROS topics."""

    camera_hz: float = param(30.0, 'camera frame rate, Hz', min=0.1, max=1000.0)
    image_size: int = param(128, 'camera image side, px', min=16, max=4096)
    seed: int = param(0, 'episode seed: object positions', min=0, max=2**31 - 1)
    cameras: list[str] = param(
        ['front', 'wrist'],
        'cameras rendered each frame with one stamp (front, wrist): front on '
        'camera/image_raw, another <name> on <name>_camera/image_raw; the shipped model '
        'sees both (a one-view model reads only front)',
    )

    def validate(self) -> None:
        bad = [c for c in self.cameras if c not in ('front', 'wrist')]
        if not self.cameras or bad or len(set(self.cameras)) != len(self.cameras):
            raise ConfigError(f'parameter cameras: front and/or wrist, got {self.cameras}')


@dataclass
class SyntheticRobotParams:
    """synthetic_robot: a deterministic camera and joint-state source."""

    robot: RobotConfig = section(RobotConfig)
    camera_hz: float = param(30.0, 'camera frame rate, Hz', min=0.1, max=1000.0)
    joint_state_hz: float = param(100.0, 'joint_states rate, Hz', min=0.1, max=10000.0)
    image_size: int = param(128, 'camera image side, px', min=16, max=4096)
    static_scene: bool = param(False, 'publish the same frame forever (the encode-once case)')
    seed: int = param(
        0, 'scene seed: the moving square and the joint phases', min=0, max=2**31 - 1
    )
    cameras: list[str] = param(
        ['front', 'wrist'],
        'views published with one stamp: front on camera/image_raw, another <name> on '
        '<name>_camera/image_raw (the same scene from another seed); as many as the served '
        'world expert needs',
    )
    follow_commands: bool = param(
        False,
        'an ideal position-controlled arm: once a command arrives on '
        'arm_controller/joint_trajectory, joint_states are its positions at each instant '
        '(linear between points, held after the last); else the scripted motion',
    )

    def validate(self) -> None:
        if 'front' not in self.cameras or len(set(self.cameras)) != len(self.cameras):
            raise ConfigError(f'parameter cameras: distinct names with front, got {self.cameras}')


@dataclass
class AgentParams:
    """robot_agent: the task cycle IDLE -> PERCEIVE -> PLAN -> ACT -> OBSERVE."""

    instruction: str = param('put the red apple in the fridge', 'the task to run')
    autostart: bool = param(True, 'start the task as soon as the node is up')
    max_attempts: int = param(2, 'executions of the task before it is aborted', min=1, max=100)
    perceive_timeout_s: float = param(
        30.0, 'no camera and joint states this long aborts the task, s', min=0.1, max=3600.0
    )
    plan_timeout_s: float = param(
        10.0, 'no answer from the harness this long aborts the task, s', min=0.1, max=3600.0
    )
    observe_s: float = param(
        1.0, 'let the scene settle this long before judging success, s', min=0.0, max=3600.0
    )
    perception_topic: str = param(
        'sim/visible_objects',
        "wam_interfaces/PerceivedObjects from the robot's detector; PERCEIVE waits for it "
        "and publishes it on perceived_objects, which the harness grounds plans on ('': "
        'none, plans are not grounded)',
    )


# Node name (as in config/wam.yaml) -> its schema.
NODE_SCHEMAS: dict[str, type] = {
    'world_expert': WorldExpertParams,
    'action_expert': ActionExpertParams,
    'action_instance': ActionInstanceParams,
    'harness': HarnessParams,
    'task_manager': TaskManagerParams,
    'task_managers': TaskManagersParams,
    'sim_robot': SimRobotParams,
    'synthetic_robot': SyntheticRobotParams,
    'robot_agent': AgentParams,
}
