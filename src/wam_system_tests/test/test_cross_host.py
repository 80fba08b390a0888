"""Representations across hosts: the Mooncake Store between a world host (127.0.0.2) and a
robot host (127.0.0.3), with the unchanged nodes, a real mooncake_master and real processes."""

import os
import random
import signal
import time

import pytest

from robot_agent.fleet import Fleet
from wam_system_tests.fleet_faults import InstanceWatch

pytest.importorskip('mooncake.store', reason='mooncake-transfer-engine-non-cuda not installed')


def test_chunks_flow_from_representations_fetched_across_hosts():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    fleet = Fleet(2, 'multi', robot='synthetic', cache='mooncake')
    try:
        assert fleet.master.ready()
        fleet.wait_ready(150)
        fleet.spin_for(5.0)
        # chunks must keep coming; how fast is the capacity bench's question (two robots'
        # two-view stacks and the store on two cores degrade most ticks at busy moments)
        fleet.spin_for(
            20.0,
            until=lambda: all(
                m.action is not None and m.action.cache_hits > 50 and m.forwarded > 20
                for m in fleet.monitors.values()
            ),
        )
        for robot in fleet.names:
            s = fleet.robot_stats(robot)
            m = fleet.monitors[robot]
            assert m.action is not None and m.forwarded > 20, robot
            assert s['world_calls_per_frame'] == 1.0, s
            # the tick read the fetched copy: the fetch happened off the tick (a tick that
            # fetched would read in about a fetch's time; an absolute bound on the read's
            # p99 failed a fresh-clone run on a loaded host at 2.03 ms, fetch p50 7.8 ms)
            assert s['fetch_ms_p50'] > 0, s
            assert s['cache_read_ms_p50'] < 0.25 * s['fetch_ms_p50'], s
            refused = {r.reason: r.count for r in m.action.rejected_inputs}
            assert not {k for k in refused if k in ('fetch_size_mismatch', 'fetch_checksum')}
            assert m.conformance.total == 0, m.last_violations
            assert m.action.cache_hits > 50, robot
    finally:
        fleet.shutdown()
    assert fleet.master is None or fleet.master.proc is None  # stopped with the fleet


def test_a_standby_fetches_from_the_store_only_once_it_takes_its_robot_over():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    fleet = Fleet(2, 'multi', robot='synthetic', cache='mooncake', instances=2)
    watch = InstanceWatch(fleet.monitors['robot1'])
    try:
        fleet.wait_ready(150)
        fleet.spin_for(3.0)
        m = fleet.monitors['robot2']
        t_kill = time.monotonic()
        fleet.kill_child('instance/i1', signal.SIGKILL)
        fleet.spin_for(5.0, until=lambda: watch.serves('i0', ['robot1', 'robot2']))
        assert watch.serves('i0', ['robot1', 'robot2']), watch.latest.get('i0')
        # (the standby's own statuses from here on, 5 a second: the counts are its own,
        # not the dead primary's)
        fleet.spin_for(1.0)
        hits = m.action.cache_hits if m.action is not None else 0
        fleet.spin_for(2.0)
        since_kill = time.monotonic() - t_kill
        # robot2's action_expert is i0's standby node now: driving it from fetched
        # representations, and only those fetched since it took over (30 Hz frames; had
        # it fetched each one since the bring-up, it would have several hundred)
        status = m.action
        assert status is not None and status.active and status.cache_hits > hits + 20
        fetch = next(s for s in status.latency if s.stage == 'fetch')
        assert 0 < fetch.samples <= 30 * since_kill + 10, (fetch.samples, since_kill)
        assert m.conformance.total == 0, m.last_violations
    finally:
        fleet.shutdown()


def test_store_paused_and_its_master_killed_never_leak_a_stale_or_unsafe_chunk():
    from wam_system_tests.fleet_faults import run_fleet

    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    out = run_fleet(['store_pause', 'store_master_kill'])
    for r in out['results']:
        print(f'{r.fault}: hold {r.hold_ms} ms, recovery {r.recovery_s} s ({r.notes})')
        assert r.unsafe == 0 and r.stale == 0 and r.conformance == 0, r
        # timing targets (70 ms, 2 s) are `make faults` figures; bound loosely here
        assert r.hold_ms is not None and r.hold_ms <= 500.0, r
        assert r.recovery_s is not None and r.recovery_s <= 10.0, r
    assert out['conformance_checked'] > 50 and out['conformance_violations'] == 0
    assert out['leaked_segments'] == [] and out['leaked_processes'] == []
