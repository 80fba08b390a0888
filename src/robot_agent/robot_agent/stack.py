"""Bring up the stack on the simulated robot: one process (default) or several.

    stack [--mode single|multi] [--robot sim|synthetic] [--duration S] [--config FILE] [--json OUT]

single: every node on one executor, in-process representation cache (a quick look: the
        gate shares the process with everything else).
multi:  world expert, action expert, harness (the gate) and task manager as their own
        processes, the experts sharing the POSIX shared-memory cache; this process runs
        the robot source and the monitor.
Prints one live status line and a summary table; --json writes the figures. Every
figure comes from the nodes' typed statuses, the same values rqt shows.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray
from lifecycle_msgs.msg import Transition
from lifecycle_msgs.srv import ChangeState
from rclpy.node import Node
from rclpy.subscription import MessageInfo
from std_msgs.msg import Bool
from trajectory_msgs.msg import JointTrajectory

from wam_core.cache.freshness import initial_ttl_ms
from wam_core.cache.inprocess import InProcessCache
from wam_core.common.check_config import require_consistent
from wam_core.common.clock import shift_at
from wam_core.common.config import ActionExpertParams, HarnessParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, resolve_path
from wam_core.common.robot import TABLETOP_ARM
from wam_core.control.conformance import ConformanceCounter, ControllerRules, violations
from wam_core.serving.latency import LatencyWindow
from wam_interfaces.msg import (
    ActionExpertStatus,
    SafetyGateStatus,
    TaskManagerStatus,
    WorldExpertStatus,
)
from wam_util import convert, qos
from wam_util.executors import BackgroundSpinner, bring_up

from .bringup import BringUp, close_nodes, stop_processes  # noqa: F401 (re-exported)
from .model_presets import PRESETS
from .model_presets import prepare as prepare_model
from .synthetic_robot import SyntheticRobot

NAN = float('nan')


class StatusWatch(Node):
    """The monitor's part that needs no receipt time: raw chunks, the safety stop, the
    nodes' typed statuses, and the level and message of every /diagnostics status. Spun
    on the stack's EventsExecutor: on the monitor's wait-set executor its messages cost
    GIL time that the encoder and the tick wait for (a single-process demo degraded 7 %
    of its ticks without that executor, against 18 % with it in the same hour,
    2026-12-04)."""

    def __init__(self, namespace: str = ''):
        super().__init__('stack_status_watch', namespace=namespace)
        self.chunks = 0
        self.holds = 0
        self.last_chunk = None  # the latest message, chunk or hold
        self.last_full_chunk = None  # the latest real chunk (a hold has one point)
        self.arrival = LatencyWindow(20000)
        self._last = None
        self.levels: dict[str, int] = {}  # /diagnostics status name -> level
        self.messages: dict[str, str] = {}  # /diagnostics status name -> message
        self.safety_stop = False
        self.world: WorldExpertStatus | None = None
        self.action: ActionExpertStatus | None = None
        self.gate: SafetyGateStatus | None = None
        self.task: TaskManagerStatus | None = None
        sub = self.create_subscription
        sub(JointTrajectory, 'action_expert/raw_chunk', self._on_chunk, 50)
        sub(Bool, 'safety/stop', self._on_stop, qos.LATCHED)
        sub(DiagnosticArray, '/diagnostics', self._on_diag, 50)
        sub(WorldExpertStatus, 'world_expert/status', self._keep('world'), qos.EVENTS)
        sub(ActionExpertStatus, 'action_expert/status', self._keep('action'), qos.EVENTS)
        sub(SafetyGateStatus, 'harness/gate_status', self._keep('gate'), qos.EVENTS)
        sub(TaskManagerStatus, 'harness/task_status', self._keep('task'), qos.EVENTS)

    def _keep(self, attr: str):
        return lambda msg: setattr(self, attr, msg)

    def _on_chunk(self, msg: JointTrajectory) -> None:
        t = time.perf_counter()
        if self._last is not None:
            self.arrival.add((t - self._last) * 1e3)
        self._last = t
        self.last_chunk = msg
        if len(msg.points) == 1:
            self.holds += 1
        else:
            self.chunks += 1
            self.last_full_chunk = msg

    def _on_stop(self, msg: Bool) -> None:
        self.safety_stop = msg.data

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for st in msg.status:
            self.levels[st.name] = convert.status_level(st)
            self.messages[st.name] = st.message


class Monitor(Node):
    """Watches what a user would. Every trajectory reaching
    /arm_controller/joint_trajectory is held against joint_trajectory_controller's
    acceptance rules (``conformance``) as the controller's process would receive it, so
    this node spins on a wait-set executor of its own (``BackgroundSpinner``): only such
    an executor hands a callback the middleware's receipt time (the drills' recorders
    subscribe here for the same reason). The rest (chunks, statuses, /diagnostics) is
    ``status``, a node on the stack's executor; its figures read through this one."""

    def __init__(self, joint_names=TABLETOP_ARM.joint_names, namespace: str = ''):
        super().__init__('stack_monitor', namespace=namespace)
        self.status = StatusWatch(namespace)
        self.conformance = ConformanceCounter()
        self._rules = ControllerRules(list(joint_names))
        self.last_violations: list[str] = []
        self.forwarded = 0
        self.create_subscription(
            JointTrajectory, 'arm_controller/joint_trajectory', self._on_forwarded, 50
        )

    def _on_forwarded(self, msg: JointTrajectory, info: MessageInfo) -> None:
        self.forwarded += 1
        bad = violations(
            self._rules,
            msg.joint_names,
            convert.conformance_points(msg),
            convert.stamp_to_ns(msg.header.stamp),
            # when the middleware received it (wall clock), as a controller with a free
            # executor would see it: not when this busy process got round to the callback
            # (on the clock the robot sees: a drill's injected step included)
            info['received_timestamp'] + shift_at(info['received_timestamp']),
        )
        self.conformance.add(bad)
        if bad:
            self.last_violations = bad


def _status_field(name: str) -> property:
    return property(lambda self: getattr(self.status, name), doc=f'``status.{name}``')


for _name in (
    'chunks', 'holds', 'last_chunk', 'last_full_chunk', 'arrival', 'levels', 'messages',
    'safety_stop', 'world', 'action', 'gate', 'task',
):  # fmt: skip
    setattr(Monitor, _name, _status_field(_name))


def _latency(status, stage: str, field: str) -> float:
    s = None if status is None else convert.latency_of(status.latency, stage)
    return NAN if s is None or s.samples == 0 else float(getattr(s, field))


def _count(status, field: str, reason: str) -> float:
    return (
        NAN if status is None else float(convert.counts_of(getattr(status, field)).get(reason, 0))
    )


def override(node: str, name: str, value) -> list[str]:
    """ROS arguments that set one node's parameter over the parameter file.

    A plain ``-p name:=value`` is a wildcard (``/**``) setting, and rcl lets a node's own
    block in the parameter file win over wildcards: only ``-p node:name:=value`` reaches a
    parameter that config/wam.yaml sets in that node's block. Only in the root namespace:
    such a rule does not reach ``/robot1/node`` (checked with these wheels), and rcl's
    command line has no syntax for a namespaced node; a fleet's nodes take a parameter
    file with a ``/**/node`` block instead (``bench/fleet.py``'s one-view overlay)."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    return ['-p', f'{node}:{name}:={text}']


class Stack(BringUp):
    def __init__(
        self,
        mode: str = 'single',
        config: str | None = None,
        camera_hz: float = 30.0,
        static_scene: bool = False,
        extra_args: list[str] | None = None,
        robot: str = 'synthetic',
        seed: int = 0,
        agent: bool = False,
        overlays: list[str] | None = None,
    ):
        """``overlays``: parameter files after ``config`` (a model preset's)."""
        self.mode = mode
        self.config = config
        self.overlays = list(overlays or [])
        if self.param_files:  # cross-node rules, before anything starts
            require_consistent(self.param_files)
        ros_args = ['--ros-args']
        for path in ([config] if config else []) + self.overlays:
            ros_args += ['--params-file', path]
        for robot_node in ('sim_robot', 'synthetic_robot'):
            ros_args += override(robot_node, 'camera_hz', camera_hz)
            ros_args += override(robot_node, 'seed', seed)
        ros_args += override('synthetic_robot', 'static_scene', static_scene)
        ros_args += list(extra_args or [])
        self.world = self.action = self.robot = self.agent = None
        self.harness = self.task_manager = None  # single mode's in-process nodes
        super().__init__(ros_args)
        self.started(lambda: self._start(mode, robot, agent))

    def _start(self, mode: str, robot: str, agent: bool) -> None:
        if robot == 'sim':
            from .sim_robot import SimRobot

            self.robot = SimRobot()
        elif robot == 'synthetic':
            self.robot = SyntheticRobot()
        else:
            raise ValueError(f'unknown robot {robot!r}')
        self.monitor = Monitor(self.joint_names())
        self.executor.add_node(self.monitor.status)
        # what reaches the robot is checked as a controller process would receive it
        self.observers = BackgroundSpinner([self.monitor])
        self.agent = None
        if agent:
            from .agent_node import AgentNode

            self.agent = AgentNode()
        for n in (self.robot, self.agent):
            if n is not None:
                self.executor.add_node(n)
        if mode == 'single':
            self._start_single()
        elif mode == 'multi':
            self._start_multi()
        else:
            raise ValueError(f'unknown mode {mode!r}')

    def _start_single(self) -> None:
        from action_expert_node.node import ActionExpertNode
        from harness_node.node import HarnessNode
        from harness_node.task_node import TaskManagerNode
        from world_expert_node.node import WorldExpertNode

        cfg = (
            load_params(self.param_files, 'world_expert', WorldExpertParams)
            if self.param_files
            else WorldExpertParams()
        )
        cache = InProcessCache(cfg.repr_cache.capacity, initial_ttl_ms(cfg.repr_cache.ttl_ms), '')
        self.cache = cache
        self.world = WorldExpertNode(cache=cache)
        self.action = ActionExpertNode(cache=cache)
        self.harness = HarnessNode()
        self.task_manager = TaskManagerNode()
        for n in (self.world, self.action, self.harness, self.task_manager):
            self.executor.add_node(n)
        # ordered as in multi mode (_start_multi): the action expert's clock starts once
        # the world expert encodes, its subscriptions (made on configure) holding joint
        # states and a representation; started together, its first ticks went "miss" and
        # "no_joint_state" (5-6 a run, 2026-12-04)
        bring_up(self.world)
        bring_up(self.action, ('configure',))
        self.wait_world_serving()
        bring_up(self.action, ('activate',))

    # the gate ('harness') and the planner ('task') in separate processes: nothing the
    # planner does (an LLM call, MiniLM, a native crash) can stall or end the gate
    CHILDREN = {
        'world': 'world_expert_node.node',
        'action': 'action_expert_node.node',
        'harness': 'harness_node.node',
        'task': 'harness_node.task_node',
    }

    # how long the world expert may take to load, warm up and encode its first frame
    WORLD_SERVING_TIMEOUT_S = 120.0

    def _start_multi(self) -> None:
        # Every process starts at once (their imports, seconds each, overlap), the action
        # expert unconfigured; it is driven to active once the world expert encodes, as a
        # lifecycle manager brings a map up before its planner: its clock then begins with
        # a representation to read, not ticking "miss" and "no_segment" through the world
        # expert's warm-up (36-60 held ticks a demo run, 2026-12-03).
        for role in self.CHILDREN:
            unconfigured = override('action_expert', 'autostart', False)
            self.start_child(role, unconfigured if role == 'action' else None)
        self.wait_world_serving()
        self.transition('action_expert', Transition.TRANSITION_CONFIGURE)
        self.transition('action_expert', Transition.TRANSITION_ACTIVATE)

    def wait_world_serving(self, timeout: float | None = None) -> None:
        """Until the world expert has encoded frames: its status says so, or in single
        mode the node itself (no status round to wait for)."""
        timeout = self.WORLD_SERVING_TIMEOUT_S if timeout is None else timeout

        def serving() -> bool:
            if self.world is not None:
                return self.world.fleet_encoder.world_calls > 0
            return self.monitor.world is not None and self.monitor.world.world_calls > 0

        self.spin_for(timeout, until=serving)
        if not serving():
            raise RuntimeError(f'the world expert encoded no frame within {timeout:.0f} s')

    def transition(self, node: str, transition_id: int, timeout: float = 60.0) -> None:
        """Drive a lifecycle node of this stack through one transition (its
        ``change_state`` service), spinning the stack meanwhile; RuntimeError if it fails."""
        client = self.monitor.create_client(ChangeState, f'{node}/change_state')
        try:
            end = time.monotonic() + timeout
            self.spin_for(timeout, until=client.service_is_ready)
            if not client.service_is_ready():
                raise RuntimeError(f'{node} offers no change_state service within {timeout} s')
            request = ChangeState.Request(transition=Transition(id=transition_id))
            future = client.call_async(request)
            self.spin_for(max(0.0, end - time.monotonic()), until=future.done)
            if not future.done() or not future.result().success:
                raise RuntimeError(f'{node}: lifecycle transition {transition_id} failed')
        finally:
            self.monitor.destroy_client(client)

    def start_child(self, role: str, extra_args: list[str] | None = None) -> subprocess.Popen:
        """(Re)start one node process of the multi-process stack."""
        args = self._ros_args + ['-p', 'repr_cache.backend:=shm'] + list(extra_args or [])
        return self.launch(role, self.CHILDREN[role], args)

    def kill_child(
        self, role: str, sig: int = signal.SIGKILL, reap: bool = True
    ) -> subprocess.Popen:
        """Signal one node process (fault injection). With ``reap`` it waits for the exit,
        which for a process holding torch takes tens of ms; a caller measuring the robot's
        reaction keeps spinning instead and waits on the returned process later."""
        p = self.kill(role, sig)
        if reap:
            p.wait(timeout=10)
        return p

    def joint_names(self) -> list[str]:
        """The robot's joints as the parameter files configure them (the monitor holds
        what the robot receives against them)."""
        if not self.param_files:
            return list(TABLETOP_ARM.joint_names)
        return list(load_params(self.param_files, 'harness', HarnessParams).robot.joint_names)

    @property
    def param_files(self) -> list[str]:
        """The parameter file and its overlays, in the order the nodes read them."""
        return ([self.config] if self.config else []) + self.overlays

    @property
    def trained(self) -> bool:
        """Whether the action expert's manifest says its weights were trained."""
        return model_trained(self.param_files)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until chunks flow and both experts report their status."""
        end = time.monotonic() + timeout

        def ready():
            m = self.monitor
            return m.chunks > 0 and m.action is not None and m.world is not None

        while not ready() and time.monotonic() < end:
            self.spin_for(0.1)
        if not ready():
            raise RuntimeError(f'no chunks and expert statuses within {timeout} s of bring-up')

    def stats(self) -> dict[str, float]:
        """Figures from the experts' latest typed statuses (NaN before the first)."""
        a, w = self.monitor.action, self.monitor.world

        def of(status, field: str) -> float:
            return NAN if status is None else float(getattr(status, field))

        return {
            'ticks': of(a, 'ticks'),
            'chunks': of(a, 'chunks'),
            'degraded_ticks': of(a, 'degraded_ticks'),
            'cache_hit_rate': of(a, 'cache_hit_rate'),
            'tick_p50': _latency(a, 'tick', 'p50_ms'),
            'tick_p99': _latency(a, 'tick', 'p99_ms'),
            'tick_max': _latency(a, 'tick', 'max_ms'),
            'forward_p50': _latency(a, 'forward', 'p50_ms'),
            'forward_p99': _latency(a, 'forward', 'p99_ms'),
            'period_p50': _latency(a, 'period', 'p50_ms'),
            'period_p99': _latency(a, 'period', 'p99_ms'),
            'period_max': _latency(a, 'period', 'max_ms'),
            'frames': of(w, 'frames'),
            'world_calls': of(w, 'world_calls'),
            'calls_per_frame': of(w, 'calls_per_distinct_frame'),
            'encode_p50': _latency(w, 'encode', 'p50_ms'),
            'encode_p99': _latency(w, 'encode', 'p99_ms'),
            # what the readers' TTL is spent on: camera stamp -> frame (every view) queued
            # for the encoder -> descriptor sent
            'capture_to_queued_p50': _latency(w, 'capture_to_queued', 'p50_ms'),
            'capture_to_queued_p99': _latency(w, 'capture_to_queued', 'p99_ms'),
            'capture_to_published_p50': _latency(w, 'capture_to_published', 'p50_ms'),
            'capture_to_published_p99': _latency(w, 'capture_to_published', 'p99_ms'),
            'repr_age_p99': _latency(a, 'repr_age', 'p99_ms'),
            'camera_hz': of(w, 'camera_rate_hz'),
            'chunk_hz': of(a, 'chunk_rate_hz'),
            'obs_to_action_p50': _latency(a, 'obs_to_action', 'p50_ms'),
            'obs_to_action_p99': _latency(a, 'obs_to_action', 'p99_ms'),
            'open_loop_ticks': _count(a, 'degraded_outcomes', 'open_loop'),
            'held_ticks': _count(a, 'degraded_outcomes', 'held'),
            'gate_changed_share': of(self.monitor.gate, 'changed_share'),
            'conformance_violations': float(self.monitor.conformance.total),
            'ttl_ms': of(a, 'ttl_ms'),
        }

    def degraded_by_reason(self) -> dict[str, int]:
        """The action expert's degraded ticks by reason (stale, miss, no_joint_state, ...)."""
        a = self.monitor.action
        return {} if a is None else convert.counts_of(a.degraded)

    def rejected_frames_by_reason(self) -> dict[str, int]:
        """The world expert's refused camera frames by reason (frozen, stamp_old, ...)."""
        w = self.monitor.world
        return {} if w is None else convert.counts_of(w.rejected)

    def _releasable(self) -> list:
        return [self.world, self.action]

    def _extra_nodes(self) -> list:
        return [self.robot, self.agent]


def model_trained(param_files: list[str]) -> bool:
    """Whether the action expert these parameter files configure has trained weights (its
    manifest's ``trained``); False when it cannot be read."""
    from wam_core.models.manifest import read_manifest

    try:
        cfg = (
            load_params(param_files, 'action_expert', ActionExpertParams)
            if param_files
            else ActionExpertParams()
        )
        return bool(read_manifest(resolve_path(cfg.model_dir)).extra.get('trained', False))
    except Exception:
        return False


UNTRAINED_NOTE = 'the weights are untrained: the arm moves but the task is not expected to succeed'


def status_line(stack: Stack) -> str:
    s = stack.stats()
    m = stack.monitor
    state = m.action.message if m.action is not None else 'starting'
    gate_reason = m.gate.stop_reason if m.gate is not None else ''
    safety = f'STOP: {gate_reason}' if m.safety_stop else 'ok'
    agent = f'agent {stack.agent.agent.state} | ' if stack.agent is not None else ''
    task = m.task.task if m.task is not None else ''
    task = f'{task[:40]} | ' if task else ''
    return (
        f'{agent}{task}world {s["camera_hz"]:4.1f} fps, calls/frame {s["calls_per_frame"]:.2f}'
        f' | chunks {m.chunks} holds {m.holds} open-loop ticks {s["open_loop_ticks"]:.0f}'
        f' | tick p99 {s["tick_p99"]:5.2f} ms'
        f' | period p99 {s["period_p99"]:5.2f} ms | cache hit {s["cache_hit_rate"] * 100:5.1f}%'
        f' | {state} | safety {safety}'
    )


def _reasons(counts: dict[str, int]) -> str:
    return ', '.join(f'{k} {v}' for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or '-'


def print_summary(stack: Stack, seconds: float) -> None:
    s = stack.stats()
    gate = stack.monitor.gate
    rows = []
    if stack.agent is not None:
        a = stack.agent.agent
        took = (
            f'{a.finished - a.started:.1f} s'
            if a.finished is not None and a.started is not None
            else '-'
        )
        rows += [
            ('task', a.instruction),
            ('success', 'yes' if a.state == 'DONE' else 'no'),
            ('agent state', f'{a.state}: {a.reason}'),
            ('time', took),
            ('attempts', f'{a.attempts}'),
        ]
        if not stack.trained:
            rows.append(('note', UNTRAINED_NOTE))
    rows += [
        ('mode', stack.mode),
        ('ran for s', f'{seconds:.0f}'),
        ('camera frames', f'{s["frames"]:.0f}'),
        ('world-expert calls', f'{s["world_calls"]:.0f}'),
        ('world calls per distinct frame', f'{s["calls_per_frame"]:.2f}'),
        ('encode p50 ms', f'{s["encode_p50"]:.2f}'),
        ('ticks', f'{s["ticks"]:.0f}'),
        ('chunks', f'{s["chunks"]:.0f}'),
        (
            'degraded ticks: open loop / held',
            f'{s["degraded_ticks"]:.0f}: {s["open_loop_ticks"]:.0f} / {s["held_ticks"]:.0f}',
        ),
        ('degraded ticks by reason', _reasons(stack.degraded_by_reason())),
        ('camera frames refused by reason', _reasons(stack.rejected_frames_by_reason())),
        ('representation TTL ms', f'{s["ttl_ms"]:.1f}'),
        ('chunks forwarded to the arm', f'{stack.monitor.forwarded}'),
        (
            'controller conformance violations',
            f'{stack.monitor.conformance.total} of {stack.monitor.conformance.checked}',
        ),
        ('gate: commands changed > tolerance', _gate_activity(gate)),
        ('safety stops', gate.safety_stops if gate is not None else '?'),
        ('cache hit rate', f'{s["cache_hit_rate"]:.3f}'),
        (
            'tick ms p50 / p99 / max',
            f'{s["tick_p50"]:.2f} / {s["tick_p99"]:.2f} / {s["tick_max"]:.2f}',
        ),
        ('forward ms p50 / p99', f'{s["forward_p50"]:.2f} / {s["forward_p99"]:.2f}'),
        (
            'period ms p50 / p99 / max',
            f'{s["period_p50"]:.2f} / {s["period_p99"]:.2f} / {s["period_max"]:.2f}',
        ),
    ]
    width = max(len(k) for k, _ in rows)
    print('\n' + '-' * (width + 24))
    for k, v in rows:
        print(f'{k:<{width}}  {v}')
    print('-' * (width + 24))


def _gate_activity(gate) -> str:
    """'0.3% (largest: arm_joint_2 p99 0.0004, max 0.0121)' from the gate's typed status."""
    if gate is None or not gate.gate_activity:
        return '?'
    worst = max(gate.gate_activity, key=lambda a: a.change_max)
    return (
        f'{gate.changed_share * 100:.2f}% (largest: {worst.joint} p99 {worst.change_p99:.4f},'
        f' max {worst.change_max:.4f})'
    )


def write_gif(stack: Stack, path: str) -> None:
    frames = getattr(stack.robot, 'record', None)
    if not frames:
        print('no camera frames recorded (the GIF needs --robot sim)')
        return
    import imageio.v2 as imageio

    imageio.mimsave(path, frames[::2], duration=1 / 15, loop=0)  # every 2nd frame, real time
    print(f'camera view: {path} ({len(frames[::2])} frames)')


def write_histogram(stack: Stack, path: str) -> None:
    if stack.action is None:
        print('the histogram needs --mode single (the tick samples live in that process)')
        return
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    ticks = stack.action.timer_stats.stages['tick'].values()
    period = stack.action.period.values()
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].hist(ticks, bins=60, color='tab:blue')
    ax[0].set_xlabel('tick latency, ms (timer fire -> chunk published)')
    ax[0].axvline(12, color='red', ls='--', label='12 ms budget')
    ax[0].legend()
    ax[1].hist(period, bins=60, color='tab:green')
    ax[1].set_xlabel('timer period, ms')
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f'latency histogram: {path}')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--mode', choices=['single', 'multi'], default='single')
    ap.add_argument(
        '--duration',
        type=float,
        default=60.0,
        help='seconds at most after bring-up; the demo ends earlier when the agent is done',
    )
    ap.add_argument('--instruction', default='put the red apple in the fridge')
    ap.add_argument('--config', default=None, help='parameter file (default: config/wam.yaml)')
    ap.add_argument('--camera-hz', type=float, default=30.0)
    ap.add_argument(
        '--static-scene', action='store_true', help='synthetic robot: the same frame forever'
    )
    ap.add_argument(
        '--robot',
        choices=['sim', 'synthetic'],
        default='sim',
        help='the MuJoCo tabletop (default) or the synthetic camera/joint-state source',
    )
    ap.add_argument('--seed', type=int, default=0, help='simulated episode seed')
    ap.add_argument(
        '--model',
        choices=sorted(PRESETS),
        default='default',
        help='default: the shipped pair; pi0: the tiny π0 (config/pi0.yaml, models/pi0_tiny, '
        'written on first use; random weights)',
    )
    ap.add_argument(
        '--planner',
        choices=['config', 'rules', 'llm'],
        default='config',
        help='llm: start the local llama.cpp server (scripts/setup_llm.sh installs it) and '
        "plan with it, the rules as fallback; rules: no LLM; config: config/wam.yaml's",
    )
    ap.add_argument(
        '--release',
        default=None,
        help='serve a registered release (python -m robot_agent.releases list) instead of '
        "the config's model_dir pair",
    )
    ap.add_argument('--json', help='write the final figures here')
    ap.add_argument('--gif', help='write the camera view as an animated GIF (sim robot)')
    ap.add_argument('--histogram', help='write a tick-latency histogram PNG (single-process mode)')
    ap.epilog = (
        'ROS arguments for the nodes go last: --ros-args -p world_expert:model_dir:=DIR ...'
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    # --ros-args ... at the end: ROS arguments for the nodes (-p node:name:=value)
    cut = argv.index('--ros-args') if '--ros-args' in argv else len(argv)
    args, ros = ap.parse_args(argv[:cut]), argv[cut + 1 :]
    args.config = args.config or default_config()
    if not os.path.exists(args.config):
        ap.error(f'config file {args.config} not found')
    tty = sys.stdout.isatty()

    def show(stack):
        line = status_line(stack)
        print(('\r' + line) if tty else line, end='' if tty else '\n', flush=True)

    extra = override('robot_agent', 'instruction', args.instruction)
    llm_server = None
    if args.planner == 'rules':
        extra += override('task_manager', 'planner.use_llm', False)
    elif args.planner == 'llm':
        from wam_core.planning.llm_server import MODEL_ALIAS, LlamaServer, LLMServerError

        print('starting the local LLM server (llama.cpp, Gemma-3-270M) ...', flush=True)
        try:
            llm_server = LlamaServer().start().wait_ready(180)
        except LLMServerError as exc:
            ap.exit(2, f'error: {exc}\n')
        print(f'LLM server ready at {llm_server.url}', flush=True)
        extra += override('task_manager', 'planner.use_llm', True)
        extra += override('task_manager', 'planner.llm_url', llm_server.url)
        extra += override('task_manager', 'planner.llm_model', MODEL_ALIAS)
        extra += override('task_manager', 'planner.schema_mode', 'json_object')
        extra += override('task_manager', 'planner.timeout_s', 60.0)  # 270M on 2 cores
    extra += ros
    overlays = prepare_model(args.model)
    if args.release:
        from .releases import overlay_for_config

        try:
            overlays.append(overlay_for_config(args.release, args.config or default_config()))
        except (RuntimeError, OSError) as exc:  # RegistryError, ConfigError
            ap.exit(2, f'error: {exc}\n')
    stack = Stack(
        args.mode,
        args.config,
        args.camera_hz,
        args.static_scene,
        extra_args=extra,
        robot=args.robot,
        seed=args.seed,
        agent=args.robot == 'sim',
        overlays=overlays,
    )
    if args.gif and hasattr(stack.robot, 'record'):
        stack.robot.record = []
    try:
        stack.wait_ready()
        finished = (
            (lambda: stack.agent.agent.state in ('DONE', 'ABORTED'))
            if stack.agent
            else (lambda: False)
        )
        t_start = time.monotonic()
        stack.spin_for(args.duration, show, 1.0 if tty else 5.0, until=finished)
        elapsed = time.monotonic() - t_start
        stack.spin_for(1.2)  # one more diagnostics round with the final counters
        print_summary(stack, elapsed)
        if args.gif:
            write_gif(stack, args.gif)
        if args.histogram:
            write_histogram(stack, args.histogram)
        if args.json:
            agent = stack.agent.agent if stack.agent is not None else None
            out = {
                **stack.stats(),
                'degraded_by_reason': stack.degraded_by_reason(),
                'rejected_frames_by_reason': stack.rejected_frames_by_reason(),
                'success': None if agent is None else agent.state == 'DONE',
            }
            with open(args.json, 'w') as fh:
                json.dump(out, fh, indent=2)
    except KeyboardInterrupt:
        pass
    finally:
        stack.shutdown()
        if llm_server is not None:
            llm_server.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
