"""Bring up a fleet: N robots, one world expert for all of them, an action expert and a
clamping gate per robot.

    fleet [--robots N] [--mode multi|single] [--robot sim|synthetic] [--duration S]
          [--json OUT]

Robot k's nodes live under /robot<k>/ (camera/image_raw, joint_states,
arm_controller/joint_trajectory, safety/stop, action_expert/..., harness/...); the world
expert runs in the root namespace with ``robots:=[robot1, ...]`` and publishes each
robot's descriptor under that robot's namespace, from one shared-memory ring per robot.

multi (default): the world expert in its own process, and per robot an action-expert
  process, a harness process (the gate) and a task-manager process (the planner): one
  robot's crash leaves the others running, and a planner's leaves its gate running.
single: every node on one executor, in-process caches (a quick look).
This process runs the robots (the MuJoCo tabletop with its agent, or the synthetic
source, each with its own seed) and one monitor per robot, and ends with a per-robot
summary. The parameters are config/wam.yaml plus config/fleet.yaml (the fleet's
overlay: a robot's gate depends on its own action expert and the shared world expert).

In multi mode the node processes are forked from a pre-loaded template (``prefork``,
multiprocessing's forkserver): a script that builds a ``Fleet`` needs the usual
``if __name__ == '__main__':`` guard, since multiprocessing imports the main module in
each child.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import yaml
from rclpy.parameter import Parameter

from wam_core.cache.freshness import initial_ttl_ms
from wam_core.cache.inprocess import InProcessCache
from wam_core.cache.mooncake_master import MooncakeMaster
from wam_core.common.check_config import require_consistent
from wam_core.common.config import HarnessParams, WorldExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config, workspace_root
from wam_core.common.process import free_port
from wam_core.serving.failover import ring_layout
from wam_util.executors import BackgroundSpinner, bring_up

from .bringup import BringUp
from .model_presets import PRESETS
from .model_presets import prepare as prepare_model
from .stack import NAN, UNTRAINED_NOTE, Monitor, _count, _latency, model_trained

# Two hosts on one machine: the world expert's side of the Mooncake Store binds to
# 127.0.0.2, the robots' side to 127.0.0.3 (Linux answers all of 127.0.0.0/8 on lo).
WORLD_HOST, ROBOT_HOST = '127.0.0.2', '127.0.0.3'

CHILDREN = {
    'world': 'world_expert_node.node',
    'action': 'action_expert_node.node',
    'instance': 'action_expert_node.instance',
    'harness': 'harness_node.node',
    'task': 'harness_node.task_node',
    'task_managers': 'harness_node.task_managers',
}


def fleet_config() -> str:
    """The fleet's parameter overlay (after config/wam.yaml)."""
    return os.path.join(workspace_root(), 'config', 'fleet.yaml')


def write_instance_params(plan, directory: str) -> str:
    """An instance's layout as a parameter file (its path), for the bring-up and the launch
    file: keyed /**/action_instance, so it matches the instance node in its namespace and
    comes after config/wam.yaml's empty lists (a -p override, or launch_ros's dict
    parameters under /**, would be applied before that block and lose to it)."""
    values = {
        'instance_name': plan.name,
        'robots': list(plan.robots),
        'standby_robots': list(plan.standby_robots) or [''],  # typed: a string list
        'peers': list(plan.peers) or [''],
    }
    path = os.path.join(directory, f'{plan.name}.yaml')
    with open(path, 'w', encoding='utf-8') as fh:
        yaml.safe_dump({'/**/action_instance': {'ros__parameters': values}}, fh)
    return path


def write_task_managers_params(robots: list[str], directory: str) -> str:
    """The task-manager host's robots as a parameter file (its path), for the launch file
    (launch_ros's dict parameters land under /**, before wam.yaml's own block)."""
    path = os.path.join(directory, 'task_managers.yaml')
    with open(path, 'w', encoding='utf-8') as fh:
        yaml.safe_dump({'/**/task_managers': {'ros__parameters': {'robots': robots}}}, fh)
    return path


def robot_names(n: int) -> list[str]:
    return [f'robot{i + 1}' for i in range(n)]


class Fleet(BringUp):
    name = 'fleet'

    def __init__(
        self,
        robots: int = 2,
        mode: str = 'multi',
        config: str | None = None,
        robot: str = 'synthetic',
        camera_hz: float = 30.0,
        seed: int = 0,
        agent: bool = False,
        instruction: str | None = None,
        extra_args: list[str] | None = None,
        cache: str = 'shm',
        world_host: str = WORLD_HOST,
        robot_host: str = ROBOT_HOST,
        prefork: bool = True,
        overlays: list[str] | None = None,
        instances: int = 0,
    ):
        """``overlays``: parameter files after config/wam.yaml and config/fleet.yaml (a
        model preset's). ``instances``: 0, an action-expert process per robot; K >= 1, the
        robots' action experts in K instance processes (``ring_layout``: contiguous blocks,
        each instance the standby of the next one's robots)."""
        if robots < 1:
            raise ValueError(f'a fleet has at least one robot, got {robots}')
        if mode not in ('single', 'multi'):
            raise ValueError(f'unknown mode {mode!r}')
        if cache not in ('shm', 'mooncake') or (cache == 'mooncake' and mode != 'multi'):
            raise ValueError(f'cache {cache!r}: shm, or mooncake with mode multi')
        self.cache = cache
        self.layout = ring_layout(robot_names(robots), instances) if instances else []
        self._params_dir: str | None = None  # the instances' parameter files
        if instances and mode != 'multi':
            raise ValueError('action-expert instances are processes: mode multi')
        self.master: MooncakeMaster | None = None
        self.mode = mode
        self.names = robot_names(robots)
        self.config = config or default_config()
        self.param_files = [self.config, fleet_config(), *(overlays or [])]
        require_consistent(self.param_files)  # cross-node rules, before anything starts
        ros_args = ['--ros-args']
        for path in self.param_files:
            ros_args += ['--params-file', path]
        # the world expert expects the rate the robots' cameras run at (TTL auto, frozen
        # camera check); a caller's own -p comes after and wins
        ros_args += ['-p', f'world_expert:expected_camera_hz:={float(camera_hz)}']
        ros_args += list(extra_args or [])
        self.world = None
        self.actions: dict[str, object] = {}
        self.harnesses: dict[str, object] = {}
        self.task_managers: dict[str, object] = {}
        self.robots: dict[str, object] = {}
        self.monitors: dict[str, Monitor] = {}
        self.agents: dict[str, object] = {}
        self._agent, self._instruction = agent, instruction
        self._preforker = None
        if cache == 'mooncake':
            # the store's master on the world host, before any expert joins the store
            self.master = MooncakeMaster(
                world_host, free_port(world_host), free_port(world_host)
            ).start()
        try:
            if self.master is not None:
                self.master.wait_ready()
                ros_args += [
                    '-p',
                    f'repr_cache.mooncake.master_address:={self.master.master_address}',
                    '-p',
                    f'repr_cache.mooncake.metadata_server:={self.master.metadata_server}',
                    '-p',
                    f'repr_cache.mooncake.local_hostname:={world_host}',
                    '-p',
                    f'repr_cache.mooncake.reader_hostname:={robot_host}',
                ]
            # node processes forked from one pre-loaded template (multi mode): the imports
            # (~210 MB a process) are shared copy-on-write instead of paid twice per robot
            if prefork and mode == 'multi':
                from .prefork import Preforker

                self._preforker = Preforker()
            super().__init__(ros_args)
        except BaseException:
            if self.master is not None:
                self.master.stop()
            raise
        self.started(lambda: self._start(robot, seed, camera_hz))

    def _start(self, robot: str, seed: int, camera_hz: float) -> None:
        joints = list(load_params(self.param_files, 'harness', HarnessParams).robot.joint_names)
        for i, name in enumerate(self.names):
            ns = f'/{name}'
            over = [
                Parameter('seed', value=int(seed + i)),
                Parameter('camera_hz', value=float(camera_hz)),
            ]
            if robot == 'sim':
                from .sim_robot import SimRobot

                self.robots[name] = SimRobot(namespace=ns, parameter_overrides=over)
            elif robot == 'synthetic':
                from .synthetic_robot import SyntheticRobot

                self.robots[name] = SyntheticRobot(namespace=ns, parameter_overrides=over)
            else:
                raise ValueError(f'unknown robot {robot!r}')
            self.monitors[name] = Monitor(joints, namespace=ns)
        for n in [*self.robots.values(), *(m.status for m in self.monitors.values())]:
            self.executor.add_node(n)
        # see Stack: what reaches each robot, as its controller process would receive it
        self.observers = BackgroundSpinner(self.monitors.values())
        if self.mode == 'single':
            self._start_single()
        else:
            self._start_multi()

    # bring-up ---------------------------------------------------------------------
    def _start_single(self) -> None:
        from action_expert_node.node import ActionExpertNode
        from harness_node.node import HarnessNode
        from harness_node.task_node import TaskManagerNode
        from world_expert_node.node import WorldExpertNode

        cfg = load_params(self.param_files, 'world_expert', WorldExpertParams)
        caches = {
            r: InProcessCache(cfg.repr_cache.capacity, initial_ttl_ms(cfg.repr_cache.ttl_ms), '')
            for r in self.names
        }
        self.world = WorldExpertNode(
            cache=caches, parameter_overrides=[Parameter('robots', value=self.names)]
        )
        self.executor.add_node(self.world)
        bring_up(self.world)
        for r in self.names:
            self.actions[r] = ActionExpertNode(namespace=f'/{r}', cache=caches[r])
            self.harnesses[r] = HarnessNode(namespace=f'/{r}')
            self.task_managers[r] = TaskManagerNode(namespace=f'/{r}')
            for n in (self.actions[r], self.harnesses[r], self.task_managers[r]):
                self.executor.add_node(n)
            bring_up(self.actions[r])

    def _start_multi(self) -> None:
        self.start_child('world')
        time.sleep(0.5)  # the writer creates the segments; readers attach lazily anyway
        for plan in self.layout:
            self.start_instance(plan.name)
        for r in self.names:
            if not self.layout:
                self.start_child('action', r)
            self.start_child('harness', r)
        # the robots' task managers share one process (0.002 cores each, but ~110 MB PSS
        # as a process of their own); the gates stay one process per robot
        self.start_child('task_managers')

    def start_child(self, role: str, robot: str = '') -> subprocess.Popen:
        """(Re)start one node process: 'world', 'task_managers' (every robot's), or a
        robot's 'action', 'harness' or 'task'."""
        args = list(self._ros_args)
        if role == 'world':
            args += ['-p', f'world_expert:robots:=[{",".join(self.names)}]']
        elif role == 'task_managers':
            args += ['-p', f'task_managers:robots:=[{",".join(self.names)}]']
        else:
            args += ['-r', f'__ns:=/{robot}']
        if role in ('world', 'action'):
            args += ['-p', f'repr_cache.backend:={self.cache}']
        # a preforked child gets this process's environment now (ROS_DOMAIN_ID may
        # differ from the one the template started with)
        spawn = self._preforker.start if self._preforker is not None else None
        key = f'{robot}/{role}' if robot else role
        return self.launch(key, CHILDREN[role], args, spawn)

    def start_instance(self, name: str) -> subprocess.Popen:
        """(Re)start one action-expert instance of the layout ('i0', ...)."""
        plan = next(p for p in self.layout if p.name == name)
        args = [*self._ros_args, '-p', f'repr_cache.backend:={self.cache}']
        # /i0/action_instance: the remap names the instance node only (a plain __ns would
        # move the robots' nodes it hosts too); its layout in a parameter file, whose
        # wildcard matches the node in that namespace (a -p override would not)
        args += ['-r', f'action_instance:__ns:=/{plan.name}']
        args += ['--params-file', self._instance_params(plan)]
        spawn = self._preforker.start if self._preforker is not None else None
        return self.launch(f'instance/{name}', CHILDREN['instance'], args, spawn)

    def _instance_params(self, plan) -> str:
        if self._params_dir is None:
            self._params_dir = tempfile.mkdtemp(prefix='wam_fleet_')
        return write_instance_params(plan, self._params_dir)

    def kill_child(self, key: str, sig: int = signal.SIGKILL) -> subprocess.Popen:
        """Signal one node process ('world', 'robot2/action', ...), for fault drills."""
        return self.kill(key, sig)

    # running ----------------------------------------------------------------------
    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every robot gets chunks and hears both experts' statuses."""
        end = time.monotonic() + timeout

        def ready(m: Monitor) -> bool:
            return (
                m.chunks > 0
                and m.action is not None
                and m.world is not None
                and m.gate is not None
                and m.task is not None
            )

        while not all(ready(m) for m in self.monitors.values()) and time.monotonic() < end:
            self.spin_for(0.1)
        late = [r for r, m in self.monitors.items() if not ready(m)]
        if late:
            raise RuntimeError(f'{", ".join(late)}: no chunks and statuses within {timeout} s')

    def start_agents(self) -> None:
        """One robot agent per robot, once the fleet is ready: with several processes
        starting on two cores a harness can take longer to come up than an agent waits
        for a plan."""
        if not self._agent:
            return
        from .agent_node import AgentNode

        over = [Parameter('instruction', value=self._instruction)] if self._instruction else []
        for name in self.names:
            self.agents[name] = AgentNode(namespace=f'/{name}', parameter_overrides=over)
            self.executor.add_node(self.agents[name])

    def reset_counters(self) -> None:
        """Start the monitors' own counts afresh (after warm-up)."""
        for m in self.monitors.values():
            m.status.chunks = m.status.holds = m.forwarded = 0

    # figures ----------------------------------------------------------------------
    def robot_stats(self, robot: str) -> dict[str, float]:
        m = self.monitors[robot]
        a, w = m.action, m.world

        def of(status, field: str) -> float:
            return NAN if status is None else float(getattr(status, field))

        mine = None if w is None else next((e for e in w.per_robot if e.robot == robot), None)
        ticks = of(a, 'ticks')
        out = {
            'ticks': ticks,
            'chunks': of(a, 'chunks'),
            'degraded_ticks': of(a, 'degraded_ticks'),
            'degraded_share': of(a, 'degraded_ticks') / ticks if ticks else NAN,
            'held_ticks': _count(a, 'degraded_outcomes', 'held'),
            'chunk_hz': of(a, 'chunk_rate_hz'),
            'tick_ms_p99': _latency(a, 'tick', 'p99_ms'),
            'period_ms_p99': _latency(a, 'period', 'p99_ms'),
            'repr_age_ms_p99': _latency(a, 'repr_age', 'p99_ms'),
            'obs_to_action_ms_p99': _latency(a, 'obs_to_action', 'p99_ms'),
            'cache_read_ms_p50': _latency(a, 'cache_read', 'p50_ms'),  # in the tick
            'cache_read_ms_p99': _latency(a, 'cache_read', 'p99_ms'),
            'fetch_ms_p50': _latency(a, 'fetch', 'p50_ms'),  # mooncake only
            'fetch_ms_p99': _latency(a, 'fetch', 'p99_ms'),
            'encode_ms_p50': _latency(w, 'encode', 'p50_ms'),
            'encode_ms_p99': _latency(w, 'encode', 'p99_ms'),
            # camera stamp -> every view queued for the encoder -> descriptor sent: with the
            # camera period, what the TTL is spent on
            'capture_to_queued_ms_p50': _latency(w, 'capture_to_queued', 'p50_ms'),
            'capture_to_queued_ms_p99': _latency(w, 'capture_to_queued', 'p99_ms'),
            'capture_to_published_ms_p50': _latency(w, 'capture_to_published', 'p50_ms'),
            'capture_to_published_ms_p99': _latency(w, 'capture_to_published', 'p99_ms'),
            'frames': NAN if mine is None else float(mine.frames),
            'world_calls_per_frame': NAN if mine is None else mine.calls_per_distinct_frame,
            'forwarded': float(m.forwarded),
            'conformance_violations': float(m.conformance.total),
            'safety_stop': float(m.safety_stop),
        }
        agent = self.agents.get(robot)
        if agent is not None:
            ag = agent.agent
            out['success'] = float(ag.state == 'DONE')
            out['time_s'] = (
                ag.finished - ag.started
                if ag.finished is not None and ag.started is not None
                else NAN
            )
        return out

    def batch_mean(self) -> float:
        w = next(iter(self.monitors.values())).world
        return NAN if w is None else float(w.batch_mean)

    def cpu_seconds_by_role(self) -> dict[str, float]:
        """CPU time so far by role: the world expert, the action experts, the harnesses
        (gates and task managers) and this process (the synthetic robots and the monitors:
        'robots'). A difference of two readings over a window is cores used."""
        roles = {'world': 'world', 'action': 'action', 'harness': 'harness', 'task': 'harness'}
        roles['task_managers'] = 'harness'
        roles.update({p.name: 'action' for p in self.layout})  # 'instance/i0'
        out = {'world': 0.0, 'action': 0.0, 'harness': 0.0, 'robots': 0.0}
        procs = [('robots', os.getpid())]
        procs += [
            (roles.get(k.rsplit('/', 1)[-1], 'robots'), p.pid) for k, p in self.children.items()
        ]
        for role, pid in procs:
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.NoSuchProcess:
                continue
            out[role] += t.user + t.system
        return out

    def memory_mb(self) -> dict[str, float]:
        """Resident memory of this process and every child together: RSS summed (counts
        the shared libraries once per process) and PSS summed (shares them out: what the
        fleet really occupies)."""
        rss = pss = 0.0
        pids = [os.getpid(), *(p.pid for p in self.children.values())]
        if self._preforker is not None and self._preforker.server_pid():
            pids.append(self._preforker.server_pid())  # the template's share counts too
        for pid in pids:
            try:
                info = psutil.Process(pid).memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            rss += info.rss / 2**20
            pss += getattr(info, 'pss', info.rss) / 2**20
        return {'rss_mb_total': rss, 'pss_mb_total': pss}

    def _releasable(self) -> list:
        return [self.world, *self.actions.values()]

    def _after_shutdown(self) -> None:
        if self.master is not None:
            self.master.stop()
        if self._params_dir is not None:
            shutil.rmtree(self._params_dir, ignore_errors=True)


def status_line(fleet: Fleet) -> str:
    parts = []
    for r in fleet.names:
        s = fleet.robot_stats(r)
        m = fleet.monitors[r]
        agent = fleet.agents.get(r)
        state = f'{agent.agent.state} ' if agent is not None else ''
        stop = ' STOP' if m.safety_stop else ''
        parts.append(
            f'{r}: {state}{s["chunk_hz"]:.0f} Hz, tick p99 {s["tick_ms_p99"]:.1f} ms, '
            f'calls/frame {s["world_calls_per_frame"]:.2f}{stop}'
        )
    return ' | '.join(parts) + f' | batch {fleet.batch_mean():.2f}'


def print_summary(fleet: Fleet, seconds: float) -> None:
    stats = {r: fleet.robot_stats(r) for r in fleet.names}
    rows = [('robot', fleet.names)]
    if fleet.agents:
        rows += [
            ('success', ['yes' if stats[r]['success'] else 'no' for r in fleet.names]),
            ('time s', [f'{stats[r]["time_s"]:.1f}' for r in fleet.names]),
            ('agent state', [fleet.agents[r].agent.state for r in fleet.names]),
        ]

    def col(key, fmt):
        return [format(stats[r][key], fmt) for r in fleet.names]

    rows += [
        ('ticks', col('ticks', '.0f')),
        ('chunks', col('chunks', '.0f')),
        ('degraded ticks', col('degraded_ticks', '.0f')),
        ('held ticks', col('held_ticks', '.0f')),
        ('chunks forwarded', col('forwarded', '.0f')),
        ('world calls per distinct frame', col('world_calls_per_frame', '.2f')),
        ('tick ms p99', col('tick_ms_p99', '.2f')),
        ('period ms p99', col('period_ms_p99', '.2f')),
        ('representation age ms p99', col('repr_age_ms_p99', '.1f')),
        ('obs -> action ms p99', col('obs_to_action_ms_p99', '.1f')),
        *(
            [
                (
                    'store fetch ms p50 / p99',
                    [
                        f'{stats[r]["fetch_ms_p50"]:.2f} / {stats[r]["fetch_ms_p99"]:.2f}'
                        for r in fleet.names
                    ],
                )
            ]
            if fleet.cache == 'mooncake'
            else []
        ),
        ('conformance violations', col('conformance_violations', '.0f')),
    ]
    mem = fleet.memory_mb()
    width = max(len(k) for k, _ in rows)
    cols = max(len(v) for _, vals in rows for v in vals) + 2
    line = '-' * (width + 2 + cols * len(fleet.names))
    print('\n' + line)
    for k, vals in rows:
        print(f'{k:<{width}}  ' + ''.join(f'{v:>{cols}}' for v in vals))
    print(line)
    print(
        f'{fleet.mode}, {len(fleet.names)} robots, {seconds:.0f} s; one world expert, mean '
        f'{fleet.batch_mean():.2f} frames per forward pass; memory: RSS {mem["rss_mb_total"]:.0f}'
        f' MB summed, PSS {mem["pss_mb_total"]:.0f} MB'
    )
    if fleet.agents and not model_trained(fleet.param_files):
        print(f'note: {UNTRAINED_NOTE}')


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--robots', type=int, default=2)
    ap.add_argument('--mode', choices=['multi', 'single'], default='multi')
    ap.add_argument('--robot', choices=['sim', 'synthetic'], default='sim')
    ap.add_argument('--duration', type=float, default=90.0, help='seconds at most')
    ap.add_argument('--instruction', default='put the red apple in the fridge')
    ap.add_argument('--config', default=None, help='parameter file (default: config/wam.yaml)')
    ap.add_argument('--seed', type=int, default=0, help="robot k's episode seed is seed + k - 1")
    ap.add_argument(
        '--no-prefork',
        action='store_true',
        help='start every node process from scratch (python -m) instead of forking it '
        'from one pre-loaded template',
    )
    ap.add_argument(
        '--cache',
        choices=['shm', 'mooncake'],
        default='shm',
        help='representations through shared memory (one host) or the Mooncake Store '
        f'(world host {WORLD_HOST}, robot host {ROBOT_HOST})',
    )
    ap.add_argument(
        '--model',
        choices=sorted(PRESETS),
        default='default',
        help='default: the shipped pair; pi0: the tiny π0 (config/pi0.yaml, written on first '
        'use; random weights)',
    )
    ap.add_argument(
        '--release',
        default=None,
        help='serve a registered release (python -m robot_agent.releases list) instead of '
        "the config's model_dir pair",
    )
    ap.add_argument(
        '--instances',
        type=int,
        default=0,
        help="K >= 1: the robots' action experts in K processes (one clock and one model "
        "each, each the standby of the next one's robots); 0: a process per robot",
    )
    ap.add_argument(
        '--camera-hz',
        type=float,
        default=30.0,
        help="the robots' camera rate, Hz (the world expert is told it too)",
    )
    ap.add_argument('--json', help='write the per-robot figures here')
    args = ap.parse_args(argv)
    if not 0 < args.camera_hz <= 1000:
        ap.error(f'--camera-hz must be in (0, 1000], got {args.camera_hz:g}')
    if args.robots < 1:
        ap.error('--robots must be at least 1')
    if not 0 <= args.instances <= args.robots:
        ap.error(f'--instances must be 0 to {args.robots} (--robots)')
    overlays = prepare_model(args.model)
    if args.release:
        from .releases import overlay_for_config

        try:
            overlays.append(overlay_for_config(args.release, args.config or default_config()))
        except (RuntimeError, OSError) as exc:  # RegistryError, ConfigError
            ap.exit(2, f'error: {exc}\n')
    tty = sys.stdout.isatty()

    def show(fleet):
        line = status_line(fleet)
        print(('\r' + line) if tty else line, end='' if tty else '\n', flush=True)

    fleet = Fleet(
        args.robots,
        args.mode,
        args.config,
        robot=args.robot,
        seed=args.seed,
        agent=args.robot == 'sim',
        instruction=args.instruction,
        cache=args.cache,
        prefork=not args.no_prefork,
        overlays=overlays,
        instances=args.instances,
        camera_hz=args.camera_hz,
    )
    ok = True
    try:
        fleet.wait_ready()
        fleet.start_agents()

        def finished():
            return bool(fleet.agents) and all(
                a.agent.state in ('DONE', 'ABORTED') for a in fleet.agents.values()
            )

        t0 = time.monotonic()
        fleet.spin_for(args.duration, show, 1.0 if tty else 5.0, until=finished)
        elapsed = time.monotonic() - t0
        fleet.spin_for(1.2)  # one more diagnostics round with the final counters
        print_summary(fleet, elapsed)
        stats = {r: fleet.robot_stats(r) for r in fleet.names}
        if fleet.agents and model_trained(fleet.param_files):
            # (untrained weights are not expected to solve the task: no failure then)
            ok = all(s['success'] for s in stats.values())
        if args.json:
            with open(args.json, 'w') as fh:
                json.dump(
                    {'robots': stats, 'batch_mean': fleet.batch_mean(), **fleet.memory_mb()},
                    fh,
                    indent=2,
                )
    except KeyboardInterrupt:
        pass
    finally:
        fleet.shutdown()
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
