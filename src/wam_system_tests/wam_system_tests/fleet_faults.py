"""The fleet's faults (part of `make faults`): two robots, one world expert, the Mooncake
Store between the world host (127.0.0.2) and the robot host (127.0.0.3).

- store_master_kill: mooncake_master killed (kill -9) and restarted 1 s later on the same
  ports (cleared: each robot's first representation after the restart);
- store_pause: mooncake_master stopped for 300 ms (SIGSTOP, then SIGCONT; cleared then);
- fleet_action_kill: robot2's action expert killed (kill -9) and restarted 1 s later
  while robot1 keeps running (cleared: robot2's first chunk from the new expert);
- fleet_world_kill: the world expert all robots share killed (kill -9) and restarted 1 s
  later (cleared: each robot's first representation from the new one).
- instance_kill (its own fleet: 4 robots on 2 action-expert instances, shared memory,
  cameras at 10 Hz so that the world expert keeps closer to 4 robots on two cores): the
  instance driving robot3 and robot4 killed (kill -9); cleared when their standby, the
  other instance, ticks them (``takeover_ms``: the kill -> its first chunk for the
  later of the two, computed after the kill); restarted 1 s later, it takes them back
  (the handback is inside the drill: chunks around it are checked like the rest).
  robot1 and robot2, on the surviving instance, keep its clock's rate within 5 % (its
  ticks per second from its heartbeats; their full chunks also depend on the world
  expert's pace).

Each robot has its own recorder on /<robot>/arm_controller/joint_trajectory with the
lone-robot drill's measures (``fault_recorder.Recorder``: hold, brake, unsafe, stale, conformance,
recovery). A fault's result takes the worst affected robot's hold and recovery and sums
every robot's unsafe, stale and conformance counts; a robot the fault must not touch has
its full-chunk rate over the fault (to its recovery) held against the same span just
before it, within 5 %.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from wam_core.common.clock import WallClock
from wam_core.common.config import ActionExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config
from wam_interfaces.msg import ActionInstanceStatus
from wam_util import convert, qos

from .fault_recorder import (
    FaultResult,
    Recorder,
    _chunk_after,
    accepted_version_and_max_age,
    configured_limits,
    shm_segments,
)

UNAFFECTED_RATE = 0.95  # an unaffected robot keeps >= 95 % of its chunk rate


def _serving_all(fleet, recs: dict[str, Recorder], timeout: float = 60.0) -> None:
    start = {r: len(rec.forwarded) for r, rec in recs.items()}

    def serving():
        return all(
            sum(1 for _, k, _ in rec.forwarded[start[r] :] if k > 1) > 25
            for r, rec in recs.items()
        )

    fleet.spin_for(timeout, until=serving)
    if not serving():
        raise RuntimeError('a robot is not forwarding chunks before the fault')


def _spin_until(fleet, cond: Callable[[], bool], timeout: float) -> bool:
    fleet.spin_for(timeout, until=cond)
    return cond()


def _full_rate(rec: Recorder, t0: float, t1: float) -> float:
    return sum(1 for t, k, _ in rec.forwarded if t0 <= t <= t1 and k > 1) / max(t1 - t0, 1e-9)


def _combine(
    name: str,
    fleet,
    recs: dict[str, Recorder],
    affected: list[str],
    t_fault: float,
    t_clear: dict[str, float | None],
    rate: Callable[[str, float, float], float] | None = None,
    rate_name: str = 'full chunks/s',
) -> FaultResult:
    """``rate(robot, t0, t1)``: what an unaffected robot must keep (default: its full
    chunks forwarded per second)."""
    rate = rate or (lambda r, t0, t1: _full_rate(recs[r], t0, t1))
    t_end = time.monotonic()
    per = {
        r: recs[r].result(name, t_fault, t_clear.get(r) if r in affected else t_fault, t_end)
        for r in recs
    }
    worst = [per[r] for r in affected]
    holds = [p.hold_ms for p in worst]
    recoveries = [p.recovery_s for p in worst]
    brakes = [p.brake_ms for p in worst]
    # the worst robot's brake, and who sent it
    braked = [p for p in worst if p.brake_ms is not None]
    latest = max(braked, key=lambda p: p.brake_ms, default=None)
    res = FaultResult(
        name,
        None if None in holds else max(holds),
        sum(p.unsafe for p in per.values()),
        sum(p.stale for p in per.values()),
        None if None in recoveries else max(recoveries),
        brake_ms=None if None in brakes else max(brakes),
        brake_by=None if None in brakes or latest is None else latest.brake_by,
        conformance=sum(p.conformance for p in per.values()),
        clear_s=max((p.clear_s or 0.0) for p in worst),
        timeline=per[affected[0]].timeline,
        hold_target_ms=per[affected[0]].hold_target_ms,
    )
    res.judge()
    notes = [f'{r}: hold {per[r].hold_ms} ms, recovery {per[r].recovery_s} s' for r in affected]
    # a robot the fault must not touch keeps its chunk rate over the fault (to recovery)
    span_end = max((t_clear.get(r) or t_end) + (per[r].recovery_s or 0.0) for r in affected)
    span = max(span_end - t_fault, 1.0)
    for r in recs:
        if r in affected:
            continue
        before = rate(r, t_fault - span, t_fault)
        during = rate(r, t_fault, t_fault + span)
        notes.append(f'{r} (unaffected): {during:.1f} {rate_name} against {before:.1f} before')
        stopped = any(v for t, v in recs[r].stops if t_fault <= t <= t_fault + span)
        if during < UNAFFECTED_RATE * before or stopped:
            res.disturbed, res.ok = True, False
            notes.append(f'{r} was disturbed' + (' (safety stop)' if stopped else ''))
    # which robot's chunks were judged stale, and why (each recorder's own notes)
    notes += [
        f'{r}: {p.stale} {p.notes[p.notes.index("stale: ") :]}' for r, p in per.items() if p.stale
    ]
    res.notes = '; '.join(notes)
    return res


def fault_store_master_kill(fleet, recs: dict[str, Recorder]) -> FaultResult:
    """Cleared when the restarted master answers: the clients' reconnection (their puts
    and gets fail until they re-register) counts against the recovery."""
    _serving_all(fleet, recs)
    t_fault = time.monotonic()
    fleet.master.kill()
    fleet.spin_for(1.0)
    fleet.master.start()
    # readiness polled while spinning: a blocked recorder would see trajectories late
    _spin_until(fleet, fleet.master.ready, 15.0)
    t_ready = time.monotonic()
    t_clear = {r: t_ready for r in recs}
    for rec in recs.values():
        _chunk_after(fleet, rec, t_ready)
    return _combine('store_master_kill', fleet, recs, list(recs), t_fault, t_clear)


def fault_store_pause(fleet, recs: dict[str, Recorder], pause_s: float = 0.3) -> FaultResult:
    _serving_all(fleet, recs)
    t_fault = time.monotonic()
    fleet.master.pause()
    fleet.spin_for(pause_s)
    fleet.master.resume()
    t_resume = time.monotonic()
    t_clear = {r: t_resume for r in recs}
    for rec in recs.values():
        _chunk_after(fleet, rec, t_resume)
    return _combine('store_pause', fleet, recs, list(recs), t_fault, t_clear)


def fault_fleet_action_kill(fleet, recs: dict[str, Recorder]) -> FaultResult:
    victim = fleet.names[-1]
    _serving_all(fleet, recs)
    fleet.spin_for(3.0)  # a baseline for the others' chunk rates
    t_fault = time.monotonic()
    dead = fleet.kill_child(f'{victim}/action', signal.SIGKILL)
    fleet.spin_for(1.0)
    dead.wait(timeout=10)
    fleet.start_child('action', victim)
    t_restart = time.monotonic()
    rec = recs[victim]
    n = len(rec.raw)
    _spin_until(fleet, lambda: len(rec.raw) > n, 60.0)
    t_clear = rec.cleared_after_restart(rec.raw, n, t_restart)
    _chunk_after(fleet, rec, t_clear)
    return _combine('fleet_action_kill', fleet, recs, [victim], t_fault, {victim: t_clear})


def fault_fleet_world_kill(fleet, recs: dict[str, Recorder]) -> FaultResult:
    """The shared world expert killed (kill -9) and restarted 1 s later: every robot
    depends on it and must hold (cleared: each robot's first representation from the new
    world expert)."""
    _serving_all(fleet, recs)
    t_fault = time.monotonic()
    dead = fleet.kill_child('world', signal.SIGKILL)
    fleet.spin_for(1.0)
    dead.wait(timeout=10)
    fleet.start_child('world')
    marks = {r: len(rec.observations) for r, rec in recs.items()}
    _spin_until(
        fleet, lambda: all(len(rec.observations) > marks[r] for r, rec in recs.items()), 60.0
    )
    t_clear = {
        r: rec.observations[marks[r]] if len(rec.observations) > marks[r] else None
        for r, rec in recs.items()
    }
    for r, rec in recs.items():
        _chunk_after(fleet, rec, t_clear[r])
    return _combine('fleet_world_kill', fleet, recs, list(recs), t_fault, t_clear)


class InstanceWatch:
    """The instances' heartbeats (/action_instances), the latest per instance."""

    def __init__(self, node):
        self.latest: dict[str, ActionInstanceStatus] = {}
        self.heard: dict[str, float] = {}  # instance -> monotonic s of its latest
        self.ticks: dict[str, list[tuple[float, int]]] = {}  # (sent at, its tick count)
        self.served: dict[str, list[tuple[float, frozenset]]] = {}  # (sent at, serving)
        self._wall = WallClock()
        node.create_subscription(
            ActionInstanceStatus, '/action_instances', self._on_heartbeat, qos.EVENTS
        )

    def _on_heartbeat(self, msg: ActionInstanceStatus) -> None:
        self.latest[msg.instance] = msg
        self.heard[msg.instance] = time.monotonic()
        # when the instance sent it (its stamp, on this process's monotonic clock): the
        # arrival times bunch up whenever this process waits for a core
        sent = self._wall.to_monotonic(convert.stamp_to_ns(msg.header.stamp) * 1e-9)
        self.ticks.setdefault(msg.instance, []).append((sent, int(msg.ticks)))
        self.served.setdefault(msg.instance, []).append((sent, frozenset(msg.serving_robots)))

    def first_served(self, instance: str, robot: str, after: float) -> float | None:
        """When the instance first said it serves the robot after ``after`` (monotonic s,
        from its stamps)."""
        return next(
            (t for t, robots in self.served.get(instance, []) if t > after and robot in robots),
            None,
        )

    def tick_rate(self, instance: str, t0: float, t1: float) -> float:
        """The instance's clock rate over [t0, t1] (monotonic s), from its heartbeats."""
        seen = [(t, n) for t, n in self.ticks.get(instance, []) if t0 <= t <= t1]
        if len(seen) < 2 or seen[-1][0] - seen[0][0] <= 0:
            return 0.0
        return (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])

    def serves(self, instance: str, robots, within_s: float = 0.5) -> bool:
        """Whether the instance, heard within ``within_s``, serves all of ``robots``."""
        m = self.latest.get(instance)
        fresh = m is not None and time.monotonic() - self.heard[instance] <= within_s
        return fresh and set(robots) <= set(m.serving_robots)


def fault_instance_kill(fleet, recs: dict[str, Recorder]) -> FaultResult:
    plan = fleet.layout[-1]
    victims = list(plan.robots)
    watch = fleet.instance_watch
    _serving_all(fleet, recs)
    fleet.spin_for(3.0)  # a baseline for the survivors' chunk rates
    marks = {r: len(recs[r].raw) for r in victims}
    t_fault = time.monotonic()
    dead = fleet.kill_child(f'instance/{plan.name}', signal.SIGKILL)

    def first_chunk(r):  # the standby's (the raw chunks' tick times, from their stamps:
        # the instance's clock, not this process's receipt); not one the killed node
        # stamped ahead before it died
        return recs[r].first_computed_after(marks[r], t_fault)

    _spin_until(fleet, lambda: all(first_chunk(r) is not None for r in victims), 5.0)
    t_clear = {r: first_chunk(r) for r in victims}
    fleet.spin_for(max(0.0, t_fault + 1.0 - time.monotonic()))
    dead.wait(timeout=10)
    fleet.start_instance(plan.name)
    handed = _spin_until(fleet, lambda: watch.serves(plan.name, victims), 60.0)
    fleet.spin_for(1.0)  # chunks after the handback are checked too
    for r in victims:
        _chunk_after(fleet, recs[r], t_clear[r])
    # the survivors keep their instance's clock: its ticks per second (their chunks also
    # depend on the world expert's pace on this loaded host, which is not the instance's)
    survivor = next(p.name for p in fleet.layout if p.name != plan.name)
    res = _combine(
        'instance_kill', fleet, recs, victims, t_fault, t_clear,
        rate=lambda r, t0, t1: watch.tick_rate(survivor, t0, t1),
        rate_name=f'ticks/s of {survivor}',
    )  # fmt: skip
    takeovers = [None if t is None else (t - t_fault) * 1e3 for t in t_clear.values()]
    res.takeover_ms = None if None in takeovers else max(takeovers)
    # the handback is inside the drill: a gate that stopped its robot at any point, the
    # takeover or the handback, fails the run (issue 26: no safety stop while the
    # takeover is faster than safety.chunk_timeout_s)
    stops = {r: [t for t, on in recs[r].stops if on and t >= t_fault] for r in recs}
    res.safety_stops = sum(len(v) for v in stops.values())
    # judged again now that the takeover is known: one within its target leaves the gate
    # nothing to brake for (the first judgement, without it, wanted a brake: the fast
    # takeovers of 2026-12-04 were counted as missed); the survivors' check stands
    res.judge()
    res.ok = res.ok and handed
    res.notes += f'; takeover {", ".join(f"{t:.0f}" if t else "-" for t in takeovers)} ms'
    # where a takeover's time goes: the survivor deciding and ticking the robot (its
    # heartbeat serves it: that tick published a chunk, or a braking hold when the newest
    # representation was past its TTL), then the first chunk (a fresh enough one). From
    # the heartbeats this process heard: one it missed makes the figure late.
    decided = [watch.first_served(survivor, r, t_fault) for r in victims]
    res.notes += (
        ' (serving from '
        + ', '.join(f'{(t - t_fault) * 1e3:.0f}' if t is not None else '-' for t in decided)
        + ' ms)'
    )
    if not handed:
        res.notes += f'; the restarted {plan.name} did not take {victims} back in 60 s'
    for r, at in stops.items():
        if at:
            res.notes += f'; {r} safety-stopped {(at[0] - t_fault) * 1e3:.0f} ms after the kill'
    return res


INSTANCE_FAULTS = {'instance_kill': fault_instance_kill}

FLEET_FAULTS = {
    'fleet_world_kill': fault_fleet_world_kill,
    'store_master_kill': fault_store_master_kill,
    'store_pause': fault_store_pause,
    'fleet_action_kill': fault_fleet_action_kill,
    **INSTANCE_FAULTS,
}


def run_fleet(faults: list[str], repeat: int = 1, robots: int = 2, progress=None) -> dict:
    """The store's and the shared experts' faults on a fleet on the Mooncake Store, then
    the instances' on a fleet of instances; each ``repeat`` times. One result."""
    store = [f for f in faults if f not in INSTANCE_FAULTS]
    mine = [f for f in faults if f in INSTANCE_FAULTS]
    outs = []
    if store:
        outs.append(_run_fleet(store, repeat, progress, robots=robots, cache='mooncake'))
    if mine:  # 4 robots on 2 instances; cameras at 10 Hz (see the module's docstring)
        outs.append(
            _run_fleet(mine, repeat, progress, robots=4, cache='shm', instances=2, camera_hz=10)
        )
    out = outs[0]
    for more in outs[1:]:
        for k, v in more.items():
            out[k] = out[k] + v
    return out


def _run_fleet(
    faults: list[str], repeat: int, progress, robots: int, cache: str, instances: int = 0,
    camera_hz: float = 30.0,
) -> dict:  # fmt: skip
    import psutil

    from robot_agent.fleet import Fleet

    config = default_config()
    before = set(shm_segments())
    fleet = Fleet(
        robots, 'multi', config, robot='synthetic', cache=cache, instances=instances,
        camera_hz=camera_hz,
    )  # fmt: skip
    fleet.instance_watch = InstanceWatch(next(iter(fleet.monitors.values())))
    results: list[FaultResult] = []
    recs: dict[str, Recorder] = {}
    pids = set()
    try:
        fleet.wait_ready(180)
        fleet.spin_for(5.0, until=lambda: all(not m.safety_stop for m in fleet.monitors.values()))
        period = load_params(config, 'action_expert', ActionExpertParams).control.period_s
        version_age = accepted_version_and_max_age(config, camera_hz)
        for r in fleet.names:
            recs[r] = Recorder(
                fleet,
                *version_age,
                configured_limits(config),
                period,
                node=fleet.monitors[r],
                namespace=f'/{r}',
            )
        for i in range(repeat):
            for name in faults:
                res = FLEET_FAULTS[name](fleet, recs)
                results.append(res)
                pids |= {p.pid for p in fleet.children.values()}
                if progress:
                    progress(i, res)
                fleet.spin_for(2.0)
    finally:
        pids |= {p.pid for p in fleet.children.values()}
        if fleet.master is not None and fleet.master.proc is not None:
            pids.add(fleet.master.proc.pid)
        fleet.shutdown()
    time.sleep(0.5)
    leaked_segments = sorted(set(shm_segments()) - before)
    leaked_procs = sorted(
        p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != 'zombie'
    )
    return {
        'results': results,
        'conformance_checked': sum(r.conformance_all.checked for r in recs.values()),
        'conformance_violations': sum(r.conformance_all.total for r in recs.values()),
        'conformance_examples': [e for r in recs.values() for e in r.conformance_examples][:5],
        'leaked_segments': leaked_segments,
        'leaked_processes': leaked_procs,
    }
