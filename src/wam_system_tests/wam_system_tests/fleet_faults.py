"""The fleet's faults (part of `make faults`): two robots, one world expert, the Mooncake
Store between the world host (127.0.0.2) and the robot host (127.0.0.3).

- store_master_kill: mooncake_master killed (kill -9) and restarted 1 s later on the same
  ports (cleared: each robot's first representation after the restart);
- store_pause: mooncake_master stopped for 300 ms (SIGSTOP, then SIGCONT; cleared then);
- fleet_action_kill: robot2's action expert killed (kill -9) and restarted 1 s later
  while robot1 keeps running (cleared: robot2's first chunk from the new expert);
- fleet_world_kill: the world expert all robots share killed (kill -9) and restarted 1 s
  later (cleared: each robot's first representation from the new one).

Each robot has its own recorder on /<robot>/arm_controller/joint_trajectory with the
lone-robot drill's measures (``faults.Recorder``: hold, brake, unsafe, stale, conformance,
recovery). A fault's result takes the worst affected robot's hold and recovery and sums
every robot's unsafe, stale and conformance counts; a robot the fault must not touch has
its full-chunk rate over the fault (to its recovery) held against the same span just
before it, within 5 %.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from wam_core.common.config import ActionExpertParams
from wam_core.common.params import load_params
from wam_core.common.paths import default_config

from .faults import (
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
) -> FaultResult:
    t_end = time.monotonic()
    per = {
        r: recs[r].result(name, t_fault, t_clear.get(r) if r in affected else t_fault, t_end)
        for r in recs
    }
    worst = [per[r] for r in affected]
    holds = [p.hold_ms for p in worst]
    recoveries = [p.recovery_s for p in worst]
    brakes = [p.brake_ms for p in worst]
    res = FaultResult(
        name,
        None if None in holds else max(holds),
        sum(p.unsafe for p in per.values()),
        sum(p.stale for p in per.values()),
        None if None in recoveries else max(recoveries),
        brake_ms=None if None in brakes else max(brakes),
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
        before = _full_rate(recs[r], t_fault - span, t_fault)
        during = _full_rate(recs[r], t_fault, t_fault + span)
        notes.append(f'{r} (unaffected): {during:.1f} full chunks/s against {before:.1f} before')
        stopped = any(v for t, v in recs[r].stops if t_fault <= t <= t_fault + span)
        if during < UNAFFECTED_RATE * before or stopped:
            res.ok = False
            notes.append(f'{r} was disturbed' + (' (safety stop)' if stopped else ''))
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


FLEET_FAULTS = {
    'fleet_world_kill': fault_fleet_world_kill,
    'store_master_kill': fault_store_master_kill,
    'store_pause': fault_store_pause,
    'fleet_action_kill': fault_fleet_action_kill,
}


def run_fleet(faults: list[str], repeat: int = 1, robots: int = 2, progress=None) -> dict:
    """Bring a fleet up on the Mooncake Store, inject ``faults`` ``repeat`` times."""
    import psutil

    from robot_agent.fleet import Fleet

    config = default_config()
    before = set(shm_segments())
    fleet = Fleet(robots, 'multi', config, robot='synthetic', cache='mooncake')
    results: list[FaultResult] = []
    recs: dict[str, Recorder] = {}
    pids = set()
    try:
        fleet.wait_ready(180)
        fleet.spin_for(5.0, until=lambda: all(not m.safety_stop for m in fleet.monitors.values()))
        period = load_params(config, 'action_expert', ActionExpertParams).control.period_s
        version_age = accepted_version_and_max_age(config)
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
