"""Which robots an action-expert instance serves, from its peers' heartbeats.

Each instance is the primary for some robots and stands by for a peer's. Every instance
publishes a heartbeat with each tick it completes, naming its own robots and the ones it
serves now; this roster turns the heartbeats it hears into the set of robots to tick.
ROS-free and clock-explicit (every call takes ``now``, s), so the rules are tested
deterministically:

- A primary claims its robots once it has heard each configured peer (or after
  ``startup_grace_s``): a restarted primary must know whether its standby drives them;
  and each robot only once it has that robot's inputs (``ready``: a joint state and a
  representation descriptor, of a world version it decodes while a live peer serves the
  robot: one restarted with a release the fleet has switched from leaves the robot to
  the standby that serves it): a restarted primary that claimed a robot before its
  subscriptions had delivered anything took it from a standby that was driving it and
  then held it, `no_joint_state`, until its gate stopped it (a fresh-clone `make test`).
  It serves a claimed robot unless a live peer says it serves it (a standby that took it
  over and has not let go yet), until it has served it once since its start: from then
  on it keeps it. A standby that took it over on a late heartbeat (a stalled executor,
  not a dead instance) lets go at the primary's next heartbeat, so the two overlap for
  a heartbeat instead of both letting go.
- A standby takes a robot over when the robot's primary instance, heard before, has been
  silent for ``takeover_after_s`` (kill -9, a tick that hangs), or was never heard in
  ``startup_grace_s``. Silent is measured against the instance's own heartbeats, which
  come back to it the same way (``on_heartbeat`` with its own name): silent for as long
  as its own kept arriving while the peer's did not. A stalled receiving side (its
  executor waiting for a core or the GIL on a loaded host) delays both, so it is not
  taken for a dead peer: measured against the clock, a 60 ms bound took over twice a
  second in a 4-robot fleet whose peers were alive (2026-12-04). Until its own have
  been heard, or once they have not been for ``own_heartbeat_lost_s`` (its loopback
  lost: it cannot tell), the clock is the reference. A late sender is not told apart:
  at 60 ms even this rule took over 673 times while 8 robots on 4 instances came up on
  2 cores, whose ticks were themselves late; the default stays 100 ms. It lets go once
  the primary, alive again, claims the robot (once its chunks reach the robot's gate:
  ``linked``); the primary drives it from the standby's first heartbeat without it. So
  the robot is never driven by two instances at once, and the gap between them is a
  heartbeat or two (the robot runs its last chunk meanwhile, as for any late chunk); a
  primary that is still starting (its executor not yet spinning: it cannot hear anyone)
  claims nothing and the standby keeps the robot meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Heartbeat:
    robots: frozenset[str]
    serving: frozenset[str]
    claimed: frozenset[str]
    at: float  # when it was heard, s


@dataclass
class Takeover:
    """A standby robot this instance took over: when, and why."""

    robot: str
    at: float
    reason: str


@dataclass
class InstanceRoster:
    name: str
    robots: tuple[str, ...]
    standby_robots: tuple[str, ...] = ()
    peers: tuple[str, ...] = ()  # instances this one expects to hear from
    takeover_after_s: float = 0.1
    startup_grace_s: float = 5.0
    started: float = 0.0
    heard: dict[str, Heartbeat] = field(default_factory=dict)
    taken: dict[str, Takeover] = field(default_factory=dict)  # standby robots served now
    takeovers: int = 0
    handbacks: int = 0
    served: set[str] = field(default_factory=set)  # own robots served since the start
    # own robots whose inputs have arrived (the instance sets it every tick); None: all
    ready: set[str] | None = None
    # own robots whose chunks reach their subscribers, the gate among them (the instance
    # sets it from its executor); None: all. A robot a live peer drives is claimed back only
    # once linked: a restarted primary's new publisher is discovered by the robot's gate
    # hundreds of ms after it first publishes on a loaded host, and a handback before
    # that left the gate without chunks past its timeout (a safety stop in 2 of 10
    # instance_kill runs, 2026-12-05)
    linked: set[str] | None = None
    own_heard: float | None = None  # when its own latest heartbeat came back, s
    own_heartbeat_lost_s: float = 1.0

    def __post_init__(self) -> None:
        overlap = set(self.robots) & set(self.standby_robots)
        if overlap:
            raise ValueError(
                f'instance {self.name}: {sorted(overlap)} both its own and on standby'
            )

    def on_heartbeat(self, instance: str, robots, serving, claimed, now: float) -> None:
        if instance == self.name:  # our own, looped back: the reference for silence
            self.own_heard = now
            return
        self.heard[instance] = Heartbeat(
            frozenset(robots), frozenset(serving), frozenset(claimed), now
        )

    def _reference(self, now: float) -> float:
        """The time a peer's silence is measured to: its own latest heartbeat's return,
        or ``now`` when there is none (recent)."""
        own = self.own_heard
        if own is None or now - own > self.own_heartbeat_lost_s:
            return now
        return own

    def silence(self, hb: Heartbeat, now: float) -> float:
        """How long the peer has been silent, s (see the module's docstring)."""
        return max(0.0, self._reference(now) - hb.at)

    def _alive(self, hb: Heartbeat, now: float) -> bool:
        return self.silence(hb, now) <= self.takeover_after_s

    def primary_of(self, robot: str) -> str | None:
        """The peer heard to be the robot's primary instance, if any."""
        return next((n for n, hb in self.heard.items() if robot in hb.robots), None)

    def claimed(self, now: float) -> set[str]:
        """Its own robots it is ready to drive (for its heartbeat): those whose inputs
        have arrived, once it has heard its peers or the grace ended; none before."""
        in_grace = now - self.started < self.startup_grace_s
        if in_grace and any(p not in self.heard for p in self.peers):
            return set()
        mine = set(self.robots) if self.ready is None else set(self.robots) & self.ready
        if self.linked is None:
            return mine
        return {
            r for r in mine if r in self.linked or r in self.served or not self.peer_serves(r, now)
        }

    def peer_serves(self, robot: str, now: float) -> bool:
        """Whether a live peer says it drives the robot now."""
        return self.peer_served_within(robot, now, self.takeover_after_s)

    def peer_served_within(self, robot: str, now: float, within_s: float) -> bool:
        """Whether a peer said it drove the robot in its latest heartbeat, heard within
        ``within_s``: a late heartbeat or two does not count as the peer gone."""
        return any(
            robot in hb.serving and self.silence(hb, now) <= within_s for hb in self.heard.values()
        )

    def serving(self, now: float) -> set[str]:
        """The robots to tick now."""
        out = set()
        in_grace = now - self.started < self.startup_grace_s
        for robot in self.claimed(now):
            held = robot not in self.served and self.peer_serves(robot, now)
            if not held:
                out.add(robot)
                self.served.add(robot)
        for robot in self.standby_robots:
            if self._should_take(robot, now, in_grace):
                if robot not in self.taken:
                    self.taken[robot] = Takeover(robot, now, self._why(robot, now))
                    self.takeovers += 1
                out.add(robot)
            elif robot in self.taken:
                del self.taken[robot]
                self.handbacks += 1
        return out

    def _should_take(self, robot: str, now: float, in_grace: bool) -> bool:
        primary = self.primary_of(robot)
        if primary is None:
            return not in_grace  # its primary never came up
        hb = self.heard[primary]
        if not self._alive(hb, now):
            return True
        # alive: kept until the primary claims it back (it may still be starting)
        return robot in self.taken and robot not in hb.claimed

    def _why(self, robot: str, now: float) -> str:
        primary = self.primary_of(robot)
        if primary is None:
            return f'no primary instance heard in {self.startup_grace_s:g} s'
        silent = self.silence(self.heard[primary], now) * 1e3
        return f'primary instance {primary} silent for {silent:.0f} ms'


@dataclass(frozen=True)
class InstancePlan:
    """One instance of a layout: its name, its robots, the robots it stands by for and
    the peers it hears from after a start."""

    name: str
    robots: tuple[str, ...]
    standby_robots: tuple[str, ...]
    peers: tuple[str, ...]


def ring_layout(robots: list[str], instances: int) -> list[InstancePlan]:
    """Robots in contiguous blocks over ``instances`` instances (4 robots on 2: robot1,
    robot2 on i0, robot3, robot4 on i1); each instance stands by for the next one's
    robots (the last for the first's), so every robot has one standby and a dead
    instance's robots all go to one survivor. One instance: no standby."""
    if not 1 <= instances <= len(robots):
        raise ValueError(f'{instances} instances for {len(robots)} robots: 1 to {len(robots)}')
    names = [f'i{k}' for k in range(instances)]
    base, extra = divmod(len(robots), instances)
    blocks, at = [], 0
    for k in range(instances):
        size = base + (1 if k < extra else 0)
        blocks.append(tuple(robots[at : at + size]))
        at += size
    return [
        InstancePlan(
            names[k],
            blocks[k],
            blocks[(k + 1) % instances] if instances > 1 else (),
            tuple(n for n in names if n != names[k]),
        )
        for k in range(instances)
    ]
