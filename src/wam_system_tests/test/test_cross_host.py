"""Representations across hosts: the Mooncake Store between a world host (127.0.0.2) and a
robot host (127.0.0.3), with the unchanged nodes, a real mooncake_master and real processes."""

import os
import random

import pytest

from robot_agent.fleet import Fleet

pytest.importorskip('mooncake.store', reason='mooncake-transfer-engine-non-cuda not installed')


def test_chunks_flow_from_representations_fetched_across_hosts():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    fleet = Fleet(2, 'multi', robot='synthetic', cache='mooncake')
    try:
        assert fleet.master.ready()
        fleet.wait_ready(150)
        fleet.spin_for(5.0)
        for robot in fleet.names:
            s = fleet.robot_stats(robot)
            m = fleet.monitors[robot]
            assert m.action is not None and m.forwarded > 20, robot
            assert s['world_calls_per_frame'] == 1.0, s
            # the tick read the fetched copy: the fetch happened off the tick
            assert s['fetch_ms_p50'] > 0 and s['cache_read_ms_p99'] < 2.0, s
            refused = {r.reason: r.count for r in m.action.rejected_inputs}
            assert not {k for k in refused if k in ('fetch_size_mismatch', 'fetch_checksum')}
            assert m.conformance.total == 0, m.last_violations
            assert m.action.cache_hits > 50, robot
    finally:
        fleet.shutdown()
    assert fleet.master is None or fleet.master.proc is None  # stopped with the fleet
