"""The release manager: switches running robots between registered model releases.

It drives the experts' ``switch_release`` services (``wam_interfaces/srv/SwitchRelease``)
and reads the robots' typed statuses; the registry (:mod:`wam_core.releases.registry`)
says what a release is and records what was done with it.

A switch of some robots to a release:

1. **load** the release's world expert on the (one) world expert and its action expert on
   each robot's action expert, beside the models that serve, verified against the
   registered manifest digests and warmed up; a load that fails aborts the switch with
   nothing changed;
2. **arm** each robot's action expert: it decodes with the new model from the first
   representation of the new world version it finds, and with the old one until then;
3. **commit** the robots on the world expert: their next observations are encoded with
   the new model (the ring changes version right before the first new entry);
4. wait for each robot's first new-version chunk (its action expert's ``switched_at``).

On a fleet of action-expert instances a robot also has a standby node on another
instance (``/<robot>/action_expert_standby``; the live instances' heartbeats on
``/action_instances`` name them): it loads, arms, aborts and confirms with the robot's
action expert, so a takeover after the switch decodes the new representations with the
new model. A standby ticks nothing: confirmed, it serves the release from its instance's
next tick. A switch while a robot's primary instance is dead fails at that primary's
service (the standby driving the robot is not switched in its place).

The replaced release stays loaded until **confirm**; a rollback within that window is
the same switch back, with no load. A canary switches some robots, watches every robot's
objectives (:mod:`wam_core.releases.objectives`) for a window, and then either promotes
(the other robots switch, everything is confirmed) or rolls the canary robots back.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field

from rclpy.node import Node

from wam_core.releases.objectives import Objectives, RobotSnapshot, RobotWindow, breaches
from wam_core.releases.registry import Release
from wam_interfaces.msg import (
    ActionExpertStatus,
    ActionInstanceStatus,
    SafetyGateStatus,
    WorldExpertStatus,
)
from wam_interfaces.srv import SwitchRelease
from wam_util import qos
from wam_util.executors import BackgroundSpinner

# the action-expert instances' heartbeats (action_expert_node.instance)
INSTANCE_HEARTBEATS = '/action_instances'
# an instance heard within this long is alive (heartbeats come every tick, 20 ms; this
# process's spinner may lag on a loaded host)
INSTANCE_LIVE_S = 1.0


class SwitchError(RuntimeError):
    """A switch that could not be made (its reason); what was changed was undone."""


@dataclass
class SwitchResult:
    release: str
    robots: list[str]
    load_s: float = 0.0  # request -> every expert loaded and warm
    switch_ms: dict[str, float] = field(default_factory=dict)  # commit -> first new chunk
    request_ms: dict[str, float] = field(default_factory=dict)  # switch request -> first chunk
    first_chunk_wall: dict[str, float] = field(default_factory=dict)  # wall s, per robot
    degraded_ticks: dict[str, int] = field(default_factory=dict)  # arm -> 0.5 s after
    degraded_reasons: dict[str, str] = field(default_factory=dict)
    # the same robot's degraded ticks in an equally long window right before the arm
    baseline_degraded: dict[str, int] = field(default_factory=dict)
    peak_rss_mb: dict[str, float] = field(default_factory=dict)  # per expert, while loading
    standbys: list[str] = field(default_factory=list)  # robots whose standby node was armed


@dataclass
class CanaryResult:
    release: str
    robots: list[str]
    promoted: bool
    reasons: list[str]
    switch: SwitchResult | None = None
    rollback: SwitchResult | None = None
    promotion: SwitchResult | None = None  # the other robots' switch, once it held
    watched_s: float = 0.0
    # first new-version chunk -> first chunk of the previous release again (an automatic
    # rollback), or request -> abort (a release that never loaded)
    auto_rollback_s: float = math.nan
    windows: dict[str, RobotWindow] = field(default_factory=dict)


def _topic(robot: str, name: str) -> str:
    return f'/{robot}/{name}' if robot else f'/{name}'


class ReleaseManager:
    """One node with the service clients and status subscriptions, spun on its own
    thread: its methods block the caller, never an executor."""

    def __init__(self, robots: list[str], timeout_s: float = 120.0, log=print):
        """``robots``: the robots' namespaces without '/' (['robot1', 'robot2']), or ['']
        for a lone robot in the root namespace."""
        self.robots = list(robots)
        self.timeout_s = timeout_s
        self.log = log
        self.node = Node('release_manager')
        self._world = self.node.create_client(SwitchRelease, '/world_expert/switch_release')
        self._actions = {
            r: self.node.create_client(SwitchRelease, _topic(r, 'action_expert/switch_release'))
            for r in self.robots
        }
        self._standbys = {
            r: self.node.create_client(
                SwitchRelease, _topic(r, 'action_expert_standby/switch_release')
            )
            for r in self.robots
            if r  # a lone robot has no instance fleet around it
        }
        self.action_status: dict[str, ActionExpertStatus] = {}
        self.gate_status: dict[str, SafetyGateStatus] = {}
        self._status_lock = threading.Lock()
        for r in self.robots:
            self.node.create_subscription(
                ActionExpertStatus,
                _topic(r, 'action_expert/status'),
                lambda m, r=r: self._keep(self.action_status, r, m),
                qos.EVENTS,
            )
            self.node.create_subscription(
                SafetyGateStatus,
                _topic(r, 'harness/gate_status'),
                lambda m, r=r: self._keep(self.gate_status, r, m),
                qos.EVENTS,
            )
        # instance name -> (monotonic s, its latest heartbeat): who stands by for whom
        self.instances: dict[str, tuple[float, ActionInstanceStatus]] = {}
        self.node.create_subscription(
            ActionInstanceStatus,
            INSTANCE_HEARTBEATS,
            lambda m: self._keep(self.instances, m.instance, m),
            qos.SENSOR,  # 50 Hz per instance: the newest is all it needs
        )
        # release -> robots whose standby a switch armed with it, for its confirm
        self._armed_standbys: dict[str, set[str]] = {}
        self.world_status: dict[str, WorldExpertStatus] = {}
        self.node.create_subscription(
            WorldExpertStatus,
            '/world_expert/status',
            lambda m: self._keep(self.world_status, '', m),
            qos.EVENTS,
        )
        self._spinner = BackgroundSpinner([self.node], name='release_manager')

    def _keep(self, where: dict, robot: str, msg) -> None:
        with self._status_lock:
            where[robot] = (time.monotonic(), msg)

    def close(self) -> None:
        for n in self._spinner.close():
            n.destroy_node()

    # calls ---------------------------------------------------------------------------
    def _reachable(self, client) -> None:
        if not client.wait_for_service(timeout_sec=10.0):
            raise SwitchError(
                f'no expert answers {client.srv_name}: is the stack running (and this '
                'process on its ROS_DOMAIN_ID)?'
            )

    def _call(self, client, phase: str, release: str = '', **fields) -> SwitchRelease.Response:
        self._reachable(client)
        req = SwitchRelease.Request(phase=phase, release=release, **fields)
        done = threading.Event()
        future = client.call_async(req)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(10.0):
            raise SwitchError(f'{client.srv_name} did not answer {phase} within 10 s')
        return future.result()

    def _live_instances(self) -> list[ActionInstanceStatus]:
        with self._status_lock:
            now = time.monotonic()
            return [m for t, m in self.instances.values() if now - t <= INSTANCE_LIVE_S]

    def standbys_of(self, robots: list[str], wait_s: float = 2.0) -> list[str]:
        """Those of ``robots`` with a standby node on a live action-expert instance (heard
        within INSTANCE_LIVE_S: a killed one's standbys are left out). Call once the
        robots' action experts are reachable: with no heartbeat publisher discovered by
        then there are no instances. Otherwise it waits up to ``wait_s`` until every
        discovered instance is heard and every robot is named as someone's standby (one
        instance: none can be), and logs the robots it found none for on a fleet of
        several (a takeover after the switch would hold them)."""
        if self.node.count_publishers(INSTANCE_HEARTBEATS) == 0:
            return []
        wanted = {r for r in robots if r}
        end = time.monotonic() + wait_s
        while True:
            live = self._live_instances()
            standing_by = {r for m in live for r in m.standby_robots}
            heard_all = len(live) >= self.node.count_publishers(INSTANCE_HEARTBEATS)
            if heard_all and (wanted <= standing_by or len(live) == 1):
                break
            if time.monotonic() > end:
                break
            time.sleep(0.02)
        if wanted - standing_by and len(live) > 1:
            self.log(
                f'no standby heard for {", ".join(sorted(wanted - standing_by))}: a takeover '
                'after this switch would hold them (version_mismatch)'
            )
        return [r for r in robots if r in standing_by]

    def standby_release(self, robot: str) -> str:
        """The release the robot's standby node serves (confirmed), from its service."""
        return self._call(self._standbys[robot], 'status').active_release

    def taken_over(self) -> set[str]:
        """The robots a live instance's standby node drives now (their primary instance
        killed or silent, not yet handed back)."""
        return {
            r for m in self._live_instances() for r in m.serving_robots if r in m.standby_robots
        }

    def drivers(self, robots: list[str], wait_s: float = 3.0) -> dict[str, tuple[str, object]]:
        """Each robot's node that drives it now, (name, client): its action expert, or the
        standby node that took it over, which a switch then loads, arms and confirms in
        its place (a dead primary cannot answer; restarted, it asks the world expert for
        the release). A robot whose action expert is not discovered yet is waited for up
        to ``wait_s``, until it is or a heartbeat says a standby drives it."""
        end = time.monotonic() + wait_s
        while True:
            taken = self.taken_over()
            unseen = [
                r for r in robots if r not in taken and not self._actions[r].service_is_ready()
            ]
            # on a fleet of instances, decided once some instance's heartbeat is heard (a
            # killed primary's service may still look discovered)
            heard = (
                bool(self._live_instances())
                or self.node.count_publishers(INSTANCE_HEARTBEATS) == 0
            )
            if (heard and not unseen) or time.monotonic() > end:
                break
            time.sleep(0.05)
        return {
            r: (f'{r}/standby', self._standbys[r])
            if r in taken
            else (f'{r or "robot"}/action', self._actions[r])
            for r in robots
        }

    def _experts(self, drivers: dict, standbys: list[str]) -> list[tuple[str, object]]:
        """The world expert, each robot's driving node, then ``standbys`` (standing by)."""
        return (
            [('world', self._world)]
            + list(drivers.values())
            + [(f'{r}/standby', self._standbys[r]) for r in standbys]
        )

    def _load(self, release: Release, experts: list, result: SwitchResult) -> None:
        t0 = time.monotonic()
        dirs = {'world': (release.world_dir, release.world_digest)}
        for name, client in experts:
            model_dir, digest = dirs.get(name, (release.action_dir, release.action_digest))
            res = self._call(
                client, 'load', release.name, model_dir=model_dir, manifest_sha256=digest
            )
            if not res.success:
                raise SwitchError(f'{name}: {res.message}')
        pending = dict(experts)
        deadline = t0 + self.timeout_s
        while pending:
            for name, client in list(pending.items()):
                res = self._call(client, 'status', release.name)
                if res.state in ('loaded', 'serving', 'armed'):
                    result.peak_rss_mb[name] = res.load_peak_rss_mb
                    del pending[name]
                elif res.state == 'failed' or res.state == 'idle':
                    raise SwitchError(f'{name} could not load {release.name}: {res.message}')
            if time.monotonic() > deadline:
                raise SwitchError(
                    f'{", ".join(pending)} still loading after {self.timeout_s:.0f} s'
                )
            time.sleep(0.05)
        result.load_s = time.monotonic() - t0

    def _abort(self, name: str, experts: list) -> None:
        for _, client in experts:
            try:
                self._call(client, 'abort', name)
            except SwitchError as exc:
                self.log(f'abort {name}: {exc}')

    def switch(self, release: Release, robots: list[str] | None = None) -> SwitchResult:
        """Switch ``robots`` (default: all) to ``release``; SwitchError (with everything
        that was loaded unloaded again) if it cannot be made."""
        robots = list(self.robots if robots is None else robots)
        result = SwitchResult(release.name, robots)
        t_request = time.time()
        self._reachable(self._world)
        drivers = self.drivers(robots)
        for _, client in drivers.values():
            self._reachable(client)  # (their instances discovered: their heartbeats heard)
        # a standby that drives its robot is switched as that robot's node, above
        result.standbys = [r for r in self.standbys_of(robots) if drivers[r][0] != f'{r}/standby']
        experts = self._experts(drivers, result.standbys)
        try:
            self._load(release, experts, result)
        except SwitchError:
            self._abort(release.name, experts)
            raise
        t_commit = time.time()
        # the robots' action experts, then their standbys: all armed before the commit
        arms = [(n, c) for n, c in experts if n != 'world']
        # from the first arm on, a standby holds this release or (aborted) none armed: an
        # earlier release it held armed is no longer its to confirm
        for armed in self._armed_standbys.values():
            armed.difference_update(result.standbys)
        for name, client in arms:
            res = self._call(client, 'arm', release.name)
            if not res.success:
                self._abort(release.name, experts)
                raise SwitchError(f'{name}: {res.message}')
        res = self._call(self._world, 'commit', release.name, robots=[r for r in robots if r])
        if not res.success:
            self._abort(release.name, experts)
            raise SwitchError(f'world: {res.message}')
        self._armed_standbys.setdefault(release.name, set()).update(result.standbys)
        pending = set(robots)
        deadline = time.monotonic() + 10.0
        while pending:
            for r in list(pending):
                res = self._call(drivers[r][1], 'status', release.name)
                if res.state == 'serving' and res.switched_at > 0:
                    result.switch_ms[r] = (res.switched_at - t_commit) * 1e3
                    result.request_ms[r] = (res.switched_at - t_request) * 1e3
                    result.first_chunk_wall[r] = res.switched_at
                    pending.discard(r)
            if time.monotonic() > deadline:
                raise SwitchError(
                    f'{", ".join(r or "robot" for r in pending)} got no representation of '
                    f'{release.name} within 10 s of the commit'
                )
            time.sleep(0.01)
        # the gates judge versions from the statuses: the switch is done once the world
        # expert reports the new version for these robots (before any confirm drops the
        # previous model from the action experts' accepted versions)
        self._wait_world_version(release.world_version, robots, time.monotonic())
        # each action expert's own count: its degraded ticks from the arm to 0.5 s after
        # its first new chunk, by reason
        pending = set(robots)
        deadline = time.monotonic() + 5.0
        while pending and time.monotonic() < deadline:
            for r in list(pending):
                res = self._call(drivers[r][1], 'status', release.name)
                if res.switch_degraded_ticks >= 0:
                    result.degraded_ticks[r] = res.switch_degraded_ticks
                    result.degraded_reasons[r] = res.switch_degraded_reasons
                    result.baseline_degraded[r] = res.switch_baseline_degraded_ticks
                    pending.discard(r)
            time.sleep(0.05)
        return result

    def confirm(self, release: str, robots: list[str] | None = None) -> None:
        robots = list(self.robots if robots is None else robots)
        armed = self._armed_standbys.get(release, set())
        standbys = [r for r in robots if r in armed]  # those its switches armed
        if standbys:  # on a live instance (a killed one's would time the confirm out)
            live = {r for m in self._live_instances() for r in m.standby_robots}
            if set(standbys) - live:
                gone = ', '.join(sorted(set(standbys) - live))
                self.log(f'the standby of {gone} is gone: not confirmed')
            standbys = [r for r in standbys if r in live]
        drivers = self.drivers(robots)  # a standby that took a robot over confirms for it
        driving = [r for r in standbys if drivers[r][0] == f'{r}/standby']
        standing_by = [r for r in standbys if r not in driving]
        for name, client in self._experts(drivers, standing_by):
            res = self._call(client, 'confirm', release)
            if not res.success:
                raise SwitchError(f'{name}: {res.message}')
        armed.difference_update(standbys)

    # statuses -----------------------------------------------------------------------
    def _latest(self, where: dict, robot: str):
        with self._status_lock:
            got = where.get(robot)
        return got[1] if got else None

    def _wait_status_after(self, robots: list[str], t: float, timeout: float = 3.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._status_lock:
                if all(self.action_status.get(r, (0.0,))[0] > t for r in robots):
                    return
            time.sleep(0.05)

    def _wait_world_version(self, version: str, robots: list[str], after: float) -> None:
        end = time.monotonic() + 5.0
        while time.monotonic() < end:
            with self._status_lock:
                got = self.world_status.get('')
            if got is not None and got[0] > after:
                msg = got[1]
                per = {e.robot: e.model_version for e in msg.per_robot}
                if all(per.get(r, msg.model_version) == version for r in robots):
                    return
            time.sleep(0.02)
        raise SwitchError(
            f'the world expert did not report version {version} for '
            f'{", ".join(r or "robot" for r in robots)} within 5 s'
        )

    def snapshot(self, robot: str) -> RobotSnapshot | None:
        """The robot's counters as its latest statuses report them, dated by when the
        action expert's status arrived (rates over a window divide by that time)."""
        with self._status_lock:
            got_a, got_g = self.action_status.get(robot), self.gate_status.get(robot)
        if got_a is None or got_g is None:
            return None
        (t_a, a), (_, g) = got_a, got_g
        degraded = {rc.reason: rc.count for rc in a.degraded}
        outcomes = {rc.reason: rc.count for rc in a.degraded_outcomes}
        return RobotSnapshot(
            t_a,
            a.release,
            int(a.ticks),
            int(a.degraded_ticks),
            int(outcomes.get('held', 0)),
            int(degraded.get('stale', 0)),
            int(a.mixed_version_ticks),
            int(g.safety_stops),
            int(g.forwarded_commands),
            int(g.changed_commands),
            int(g.commands_at_limit),
            int(a.chunks),
            float(g.seam_jump_window),
            {j.joint: int(j.commands_at_limit) for j in g.gate_activity},
            frozenset(g.joints_at_limit),
        )

    def serving(self, robot: str) -> str:
        s = self._latest(self.action_status, robot)
        return s.release if s is not None else ''

    # canary ---------------------------------------------------------------------------
    def canary(
        self,
        release: Release,
        live: Release,
        robots: list[str],
        window_s: float = 30.0,
        objectives: Objectives | None = None,
        promote: bool = True,
        confirm: bool = True,
    ) -> CanaryResult:
        """Switch ``robots`` to ``release`` and watch them against the objectives (and the
        other robots' chunk rate) for ``window_s``: breached, they switch back to
        ``live`` at once; held, the release is promoted to every robot (``promote``)."""
        objectives = objectives or Objectives()
        others = [r for r in self.robots if r not in robots]
        out = CanaryResult(release.name, list(robots), False, [])
        # joints the live release has parked at a limit now: the new release keeping them
        # there is not its doing (a policy that drifts to a stop in this robot's scene)
        before = {r: self.snapshot(r) for r in robots}
        parked = {r: s.parked if s is not None else frozenset() for r, s in before.items()}
        t_request = time.monotonic()
        try:
            out.switch = self.switch(release, robots)
        except SwitchError as exc:
            out.reasons = [f'the switch failed: {exc}']
            out.auto_rollback_s = time.monotonic() - t_request
            return out
        t_switched = time.monotonic()
        self._wait_status_after(self.robots, t_switched)
        start = {r: self.snapshot(r) for r in self.robots}
        seam = {r: 0.0 for r in robots}
        while time.monotonic() - t_switched < window_s:
            time.sleep(0.25)
            now = {r: self.snapshot(r) for r in self.robots}
            wins = {
                r: RobotWindow.between(start[r], now[r], parked.get(r, frozenset()))
                for r in self.robots
                if start[r] is not None and now[r] is not None
            }
            for r in robots:  # the seam window resets per report: keep the worst
                if now.get(r) is not None:
                    seam[r] = max(seam[r], now[r].seam_jump_rad)
            live_wins = [wins[r] for r in others if r in wins]
            live_rate = (
                sum(w.chunk_rate_hz for w in live_wins) / len(live_wins) if live_wins else None
            )
            live_degraded = (
                sum(w.degraded_share for w in live_wins) / len(live_wins) if live_wins else None
            )
            live_held = (
                sum(w.held_ticks for w in live_wins) / len(live_wins) if live_wins else None
            )
            reasons = []
            for r in robots:
                if r not in wins or wins[r].seconds < 2.0:
                    continue  # at least two reports before judging
                w = wins[r]
                w = RobotWindow(**{**w.__dict__, 'seam_jump_rad': seam[r]})
                out.windows[r] = w
                reasons += [
                    f'{r or "robot"}: {b}'
                    for b in breaches(w, objectives, live_rate, live_degraded, live_held)
                ]
            if reasons:
                out.reasons = reasons
                out.watched_s = time.monotonic() - t_switched
                self.log(f'canary {release.name} breached: {"; ".join(reasons)}: rolling back')
                out.rollback = self.switch(live, robots)
                self.confirm(live.name, robots)
                out.auto_rollback_s = max(
                    out.rollback.first_chunk_wall[r] - out.switch.first_chunk_wall[r]
                    for r in robots
                )
                return out
        out.watched_s = time.monotonic() - t_switched
        if promote:
            if others:
                out.promotion = self.switch(release, others)
            if confirm:
                self.confirm(release.name)
        out.promoted = True
        return out
