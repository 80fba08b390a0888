"""Action-expert instance: one process, one 50 Hz clock, several robots.

Each robot keeps its own action expert (``ActionExpertNode`` in the robot's namespace,
hosted): its cache reader, joint states, subtask, chunk stream, lead, blending and
hold_last_action, status and /diagnostics, as when it runs alone. The instance shares
what can be shared: one model in memory, one deadline clock whose tick decodes every
served robot's chunk together (``batched_decode``: one forward when the model has
``decode_batch``), one process's runtime. A robot's bad input, or a decode that raises
for it, stays that robot's degraded tick.

Failover: the instance is the primary for ``robots`` and stands by for a peer's
``standby_robots`` with a warm node each (``/<robot>/action_expert_standby``: inputs
followed, scene prepared on the first tick, nothing published). Every tick it
publishes a heartbeat on /action_instances; ``wam_core.serving.failover`` decides from
the peers' heartbeats which robots it ticks: a standby robot once its primary instance
has been silent for ``takeover_after_s``, given back when the primary reports again. The
robot's gate sees a late chunk meanwhile and brakes it to a hold, never a safety stop
while the takeover is faster than ``safety.chunk_timeout_s``. A standby node that
serves reports as the robot's ``action_expert``, so the gate hears the role it depends on.

    ros2 run action_expert_node action_instance --ros-args --params-file config/wam.yaml \\
        -p robots:=[robot1,robot2] -p standby_robots:=[robot3,robot4] -p peers:=[i1] \\
        -p instance_name:=i0
"""

from __future__ import annotations

import threading
import time

from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Header

from wam_core.common.clock import wall_ns
from wam_core.common.config import ActionInstanceParams
from wam_core.common.params import ConfigError
from wam_core.common.status import OK, WARN
from wam_core.common.thread_errors import ThreadErrors
from wam_core.serving.batched_decode import decode_together
from wam_core.serving.deadline_timer import DeadlineTimer
from wam_core.serving.failover import InstanceRoster
from wam_core.serving.interpreter import freeze_heap, shorten_gil_switch_interval
from wam_interfaces.msg import ActionInstanceStatus
from wam_interfaces.srv import SwitchRelease
from wam_util import convert, qos
from wam_util.diagnostics import NodeDiagnostics
from wam_util.executors import run_node
from wam_util.params import NodeParams
from wam_util.release_query import ReleaseQuestion

from .node import ActionExpertNode

HEARTBEATS = '/action_instances'
# how often the executor checks whether the robots' chunk publishers reach their gates
# (graph queries: off the clock's thread; against a settle time of seconds)
LINK_CHECK_S = 0.1
# How long a restarted instance waits, from when it first sees a peer drive one of its
# robots, for that peer to say which release it serves it with, before it falls back to
# the world-version rule alone
RELEASE_ANSWER_S = 5.0


class ActionInstance(Node):
    def __init__(self, **kwargs):
        super().__init__('action_instance', **kwargs)
        self.cfg: ActionInstanceParams = NodeParams(self, ActionInstanceParams).read()
        if not self.cfg.robots:  # (wam.yaml lists none: the bring-up's layout does)
            raise ConfigError('parameter robots must name at least one robot, got []')
        self.instance = self.cfg.instance_name or self.get_name()
        self.experts: dict[str, ActionExpertNode] = {}  # robot -> its node here
        self.thread_errors = ThreadErrors(lambda m: self.get_logger().error(m))
        self._lock = threading.Lock()  # the roster: heartbeats in, the tick's decision
        self.roster: InstanceRoster | None = None
        self.serving: set[str] = set()
        self.ticks = 0
        self.batch_size = 0
        self.clock: DeadlineTimer | None = None
        self._linked: set[str] = set()  # own robots whose chunks reach their gate
        self._matched_since: dict[str, float] = {}
        # own robots not claimed because their representations are of a world version this
        # instance's model does not decode (the clock's thread writes, the executor logs)
        self.undecodable: dict[str, str] = {}
        self._told: set[tuple[str, str]] = set()
        # Which release each robot is served with where a peer drives it, asked once per
        # robot of that peer's node (its switch_release status): a restarted instance comes
        # back with the model its parameters name, not the one the fleet was switched to
        # since, and brings its node onto the peer's before it claims the robot back (or
        # before it could take it over). Robots checked: answered, and on that release or
        # given up on (the world-version rule decides then).
        self._release_checked: set[str] = set()
        self._release_asked: dict[str, float] = {}  # robot -> first asked (monotonic)
        self._release_wanted: dict[str, tuple[str, str, str]] = {}  # name, dir, sha256
        self._release_questions: dict[str, ReleaseQuestion] = {}
        self._beat = self.create_publisher(ActionInstanceStatus, HEARTBEATS, qos.EVENTS)
        self.create_subscription(ActionInstanceStatus, HEARTBEATS, self._on_heartbeat, qos.EVENTS)
        self.diagnostics = NodeDiagnostics(self)
        self.diagnostics.add('action instance', self._report)
        self.create_timer(self.diagnostics.TIMER_S, self._diagnostics_due)
        self.create_timer(LINK_CHECK_S, self._check_links)
        self.create_timer(LINK_CHECK_S, self._check_releases)

    # bring-up --------------------------------------------------------------------
    def bring_up(self) -> list[ActionExpertNode]:
        """Configure and activate every robot's node (the model loaded once), then start
        the clock; the nodes, for the executor. Raises SystemExit on a failed transition."""
        cfg = self.cfg
        first = ActionExpertNode(namespace=f'/{cfg.robots[0]}', hosted=True)
        self._up(cfg.robots[0], first)
        model = first.ticker.model
        for robot in cfg.robots[1:]:
            self._up(robot, ActionExpertNode(namespace=f'/{robot}', model=model, hosted=True))
        # a standby node is not named action_expert (the robot's primary instance has
        # that node), so no parameter file rule names it: it gets the first robot's values
        same = [Parameter(n, value=p.value) for n, p in first._parameters.items()]
        for robot in cfg.standby_robots:
            node = ActionExpertNode(
                'action_expert_standby',
                namespace=f'/{robot}',
                model=model,
                hosted=True,
                reports_as='action_expert',
                parameter_overrides=same,
            )
            self._up(robot, node)
        periods = {n.cfg.control.period_s for n in self.experts.values()}
        if len(periods) != 1:  # a start-up failure (exit 1), as a failed transition is
            raise SystemExit(f'the robots run at different control periods {sorted(periods)}')
        self.roster = InstanceRoster(
            self.instance,
            tuple(cfg.robots),
            tuple(cfg.standby_robots),
            tuple(cfg.peers),
            cfg.takeover_after_s,
            cfg.startup_grace_s,
            started=time.monotonic(),
            linked=set(),  # none until the executor's link check has seen them matched
        )
        for robot in cfg.robots:  # a peer's standby drives it after a takeover
            self._release_questions[robot] = ReleaseQuestion(
                self.create_client(SwitchRelease, f'/{robot}/action_expert_standby/switch_release')
            )
        for robot in cfg.standby_robots:  # its primary instance drives it
            self._release_questions[robot] = ReleaseQuestion(
                self.create_client(SwitchRelease, f'/{robot}/action_expert/switch_release')
            )
        freeze_heap()
        self.clock = DeadlineTimer(
            periods.pop(), self._tick, 'action_instance_tick', cfg.realtime_priority,
            self.thread_errors,
        )  # fmt: skip
        self.clock.start()
        self.get_logger().info(
            f'instance {self.instance}: robots {", ".join(cfg.robots)}'
            + (f'; standby for {", ".join(cfg.standby_robots)}' if cfg.standby_robots else '')
            + f'; one model, one clock every {first.cfg.control.period_s * 1e3:.1f} ms'
        )
        self.diagnostics.publish()
        return list(self.experts.values())

    def _up(self, robot: str, node: ActionExpertNode) -> None:
        self.experts[robot] = node  # released with the rest, even if it fails here
        for name in ('configure', 'activate'):
            if getattr(node, f'trigger_{name}')() != TransitionCallbackReturn.SUCCESS:
                raise SystemExit(f'/{robot}/{node.get_name()}: {name} failed, see the log above')

    # heartbeats ----------------------------------------------------------------------
    def _on_heartbeat(self, msg: ActionInstanceStatus) -> None:
        if self.roster is None:
            return
        with self._lock:
            self.roster.on_heartbeat(
                msg.instance, msg.robots, msg.serving_robots, msg.claimed_robots, time.monotonic()
            )

    def _heartbeat(self, claimed: set[str]) -> None:
        self._beat.publish(
            ActionInstanceStatus(
                header=Header(stamp=convert.ns_to_stamp(wall_ns())),
                instance=self.instance,
                robots=list(self.cfg.robots),
                standby_robots=list(self.cfg.standby_robots),
                claimed_robots=sorted(claimed),
                serving_robots=sorted(self.serving),
                ticks=self.ticks,
                batch_size=self.batch_size,
            )
        )

    # the clock -----------------------------------------------------------------------
    def _ready(self, now: float) -> set[str]:
        """Own robots whose inputs are in (under the roster's lock). One that a live peer
        serves is also claimed only once this instance's node runs the release the peer
        serves it with (asked of the peer and loaded here: restarted with the model its
        parameters name after a release switch, it would otherwise drive the robot with
        the release switched from), and only if its representations are of a version this
        instance decodes (without it, it would hold the robot on ``version_mismatch``): it
        leaves the robot with the peer meanwhile and says why. One that no peer
        serves (none heard serving it for ``startup_grace_s``: a late heartbeat is not a
        gone peer), or that it serves itself, is claimed whatever arrives (its holds and
        their reason are then the robot's own status, not a silence its gate stops on)."""
        ready = set()
        for r in self.cfg.robots:
            node = self.experts[r]
            if not (node.ready and node.ticker.has_inputs):
                self.undecodable.pop(r, None)
                continue
            if r in self.serving:  # the usual case: nothing more to look at
                ready.add(r)
                continue
            if not self.roster.peer_served_within(r, now, self.cfg.startup_grace_s):
                ready.add(r)
                self.undecodable.pop(r, None)
                continue
            if not self._release_settled(r, now):
                continue  # its peer's release: asked, or being loaded here
            seen = node.ticker.descriptor_version
            if node.ticker.decodes(seen):
                ready.add(r)
                self.undecodable.pop(r, None)
            else:
                self.undecodable[r] = seen
        return ready

    def _release_settled(self, robot: str, now: float) -> bool:
        """Whether the release a peer drives ``robot`` with no longer holds its claim back:
        checked (on it, or given up on), or no answer within ``RELEASE_ANSWER_S``."""
        if robot in self._release_checked:
            return True
        asked = self._release_asked.get(robot)
        return (
            asked is not None
            and robot not in self._release_wanted
            and (now - asked > RELEASE_ANSWER_S)
        )

    def _tick(self, deadline: float) -> None:
        with self._lock:
            now = time.monotonic()
            self.roster.ready = self._ready(now)
            wanted = self.roster.serving(now)
            claimed = self.roster.claimed(now)
            taken = dict(self.roster.taken)
        self._hand_over(wanted, taken)
        nodes = [self.experts[r] for r in sorted(self.serving) if self.experts[r].ready]
        starts = [n.tick_started(deadline) for n in nodes]
        results, self.batch_size = decode_together(
            [n.ticker for n in nodes], self.cfg.batch.max_size
        )
        for node, t0, res in zip(nodes, starts, results, strict=True):
            try:
                if isinstance(res, BaseException):
                    raise res
                node.serve_tick(res, deadline, t0)
            except Exception as exc:  # this robot's, counted where its status shows it
                node.thread_errors.record(exc, f'{node.get_namespace()} tick')
        self.ticks += 1
        self._heartbeat(claimed)
        for robot, node in self.experts.items():  # a confirmed or adopted release, off
            if robot not in self.serving:  # the robots' path
                node.between_ticks()

    def _tell_undecodable(self) -> None:
        for robot, version in list(self.undecodable.items()):
            if (robot, version) not in self._told:
                self._told.add((robot, version))
                self.get_logger().warning(
                    f'{robot} not claimed: its representations are of world version '
                    f'{version}, this instance decodes {self.experts[robot].ticker.version} '
                    '(restarted with a release the fleet switched from?): the peer serving '
                    'it keeps it; restart this instance with the live release'
                )

    def _check_releases(self) -> None:
        """On the executor: for each robot a live peer drives and not yet checked, ask that
        peer's node (once answered, never again: afterwards the release manager switches
        both nodes together) and bring this instance's node onto the release it names."""
        if self.roster is None:
            return
        now = time.monotonic()
        with self._lock:
            driven = {
                r
                for r in self.experts
                if r not in self._release_checked
                and r not in self.serving
                and self.roster.peer_served_within(r, now, self.cfg.startup_grace_s)
            }
            wanted = dict(self._release_wanted)
        for robot in sorted(driven - set(wanted)):
            with self._lock:  # the answer's wait is timed from here, whatever the graph says
                self._release_asked.setdefault(robot, now)
            question = self._release_questions[robot]
            question.ask(lambda res, r=robot: self._on_release_answer(r, res))
        for robot, (name, model_dir, digest) in wanted.items():
            self._adopt(robot, name, model_dir, digest)

    def _on_release_answer(self, robot: str, res) -> None:
        if not res.success or not res.active_release or robot in self._release_checked:
            return  # not configured, or adopting a release itself: asked again
        node = self.experts[robot]
        with self._lock:
            if res.active_release == node.ticker.tag:
                self._release_checked.add(robot)
            elif not res.active_model_dir:
                self._release_checked.add(robot)  # the world-version rule decides
                self.get_logger().warning(
                    f'{robot}: the peer serves it with release {res.active_release}, this '
                    f'instance runs {node.ticker.tag}, and the peer does not say where '
                    f'{res.active_release} lives: restart this instance with it'
                )
            else:
                self._release_wanted[robot] = (
                    res.active_release,
                    res.active_model_dir,
                    res.active_manifest_sha256,
                )
                self.get_logger().info(
                    f'{robot}: its peer serves it with release {res.active_release}; this '
                    f'instance started on {node.ticker.tag}: loading {res.active_release}'
                )

    def _adopt(self, robot: str, name: str, model_dir: str, digest: str) -> None:
        state = self.experts[robot].adopt_release(name, model_dir, digest)
        if state == 'serving' or state.startswith('failed'):
            with self._lock:
                self._release_wanted.pop(robot, None)
                self._release_checked.add(robot)
            if state == 'serving':
                self.get_logger().info(f'{robot}: on release {name}, as its peer')
            else:
                self.get_logger().warning(
                    f'{robot}: release {name} not adopted ({state[len("failed: ") :]}); '
                    'the world-version rule decides whether it is claimed'
                )

    def _check_links(self) -> None:
        """On the executor: own robots whose chunk publisher has matched every subscriber
        this process knows of for ``handback_settle_s`` go to the roster
        (``InstanceRoster.linked``); once linked, a robot stays linked."""
        self._tell_undecodable()
        if self.roster is None or len(self._linked) == len(self.cfg.robots):
            return
        now = time.monotonic()
        for robot in self.cfg.robots:
            if robot in self._linked:
                continue
            if self.experts[robot].chunks_reach_subscribers():
                since = self._matched_since.setdefault(robot, now)
                if now - since >= self.cfg.handback_settle_s:
                    self._linked.add(robot)
            else:
                self._matched_since.pop(robot, None)
        with self._lock:
            self.roster.linked = set(self._linked)

    def _hand_over(self, wanted: set[str], taken: dict) -> None:
        for robot in sorted(wanted - self.serving):
            self.experts[robot].start_serving()
            if robot in taken:
                self.get_logger().warning(f'took {robot} over: {taken[robot].reason}')
        for robot in sorted(self.serving - wanted):
            self.experts[robot].stop_serving()
            if robot in self.cfg.standby_robots:
                self.get_logger().info(f'{robot} handed back to its primary instance')
        self.serving = wanted

    # status --------------------------------------------------------------------------
    def _diagnostics_due(self) -> None:
        if self.diagnostics.due():
            self.diagnostics.publish()

    def _report(self):
        # on the executor's thread: the roster changes on the clock's, under the lock
        with self._lock:
            taken = sorted(self.roster.taken) if self.roster is not None else []
            counts = (self.roster.takeovers, self.roster.handbacks) if self.roster else (0, 0)
        level, message = OK, f'serving {len(self.serving)} robots'
        if self.roster is None:
            level, message = WARN, 'starting'
        elif taken:
            level, message = WARN, f'serving {", ".join(taken)} for a silent peer'
        elif self._release_wanted:
            wanted = sorted(self._release_wanted.items())
            loading = ', '.join(f'{r}: {n}' for r, (n, _, _) in wanted)
            level, message = WARN, f'loading the release its peer serves ({loading})'
        elif self.undecodable:
            left = ', '.join(sorted(self.undecodable))
            level, message = WARN, f'{left} left to the standby: a world version not decoded here'
        elif self.thread_errors.total:
            level, message = WARN, f'{self.thread_errors.total} exceptions survived'
        values = [
            ('instance', self.instance),
            ('robots', ', '.join(self.cfg.robots)),
            ('standby_robots', ', '.join(self.cfg.standby_robots)),
            ('serving', ', '.join(sorted(self.serving))),
            ('ticks', self.ticks),
            ('batch_size', self.batch_size),
            ('takeovers', counts[0]),
            ('handbacks', counts[1]),
            ('skipped_deadlines', self.clock.skipped if self.clock else 0),
        ]
        return level, message, values

    def release(self) -> None:
        if self.clock is not None and not self.clock.stop():
            # the tick still runs and may still read the caches and publish: they stay
            self.get_logger().error('the clock did not stop within 2 s: nothing released')
            return
        self.clock = None
        for node in self.experts.values():
            if node.ready:
                node.trigger_deactivate()  # the robots it drives brake to a hold
            node.release()


def main(args=None) -> None:
    """One instance process (``robots``, ``standby_robots`` and ``peers`` from its
    parameters)."""
    shorten_gil_switch_interval()
    run_node(ActionInstance, args, hosted=lambda instance: instance.bring_up())


if __name__ == '__main__':
    main()
