"""Action-expert instances through real rclpy and real processes: two synthetic robots,
each on its own instance process, each instance the other's standby.

Checks what running several robots per action-expert process must keep: each robot's
chunks from its own representation and joint state, the robot's gate hearing its
action expert whichever instance serves it, and failover: kill -9 one instance and the
other ticks its robot within the takeover bound, decoding both robots in one forward,
with no safety stop; the restarted instance takes its robot back. A release switch
reaches the standby nodes too: a takeover after it serves the release, and the primary
restarted with the release switched from loads the release its peer serves before it
takes its robot back.
"""

import os
import random
import signal
import time
import uuid

import pytest
from std_msgs.msg import Bool

from robot_agent.fleet import Fleet
from wam_core.common.robot import TABLETOP_ARM
from wam_system_tests.fleet_faults import InstanceWatch


@pytest.fixture(scope='module')
def fleet(tmp_path_factory):
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    name = f'wam_instances_test_{uuid.uuid4().hex[:8]}'
    # the registry a restarted node looks a release up in (its default: the fleet's
    # processes are forked from a template that has this environment)
    db = str(tmp_path_factory.mktemp('releases') / 'releases.db')
    before = os.environ.get('WAM_RELEASES_DB')
    os.environ['WAM_RELEASES_DB'] = db
    f = Fleet(
        2, 'multi', robot='synthetic', instances=2,
        extra_args=['-p', f'repr_cache.shm_name:={name}'],
    )  # fmt: skip
    f.watch = InstanceWatch(f.monitors['robot1'])
    f.releases_db = db
    try:
        f.wait_ready(150)
        f.spin_for(3.0)  # the gates clear their start-up stops
        yield f
    finally:
        f.shutdown()
        if before is None:
            os.environ.pop('WAM_RELEASES_DB', None)
        else:
            os.environ['WAM_RELEASES_DB'] = before


def test_each_instance_serves_its_own_robot_and_reports_as_its_action_expert(fleet):
    fleet.spin_for(10.0, until=lambda: len(fleet.watch.latest) == 2)
    i0, i1 = fleet.watch.latest['i0'], fleet.watch.latest['i1']
    assert list(i0.robots) == ['robot1'] and list(i0.standby_robots) == ['robot2']
    assert list(i0.serving_robots) == ['robot1'] and list(i1.serving_robots) == ['robot2']
    names = fleet.monitors['robot1'].get_node_names_and_namespaces()
    assert ('action_expert', '/robot1') in names and ('action_expert_standby', '/robot1') in names
    for robot in ('robot1', 'robot2'):
        m = fleet.monitors[robot]
        assert m.forwarded > 20 and not m.safety_stop, robot
        assert m.action is not None and m.action.chunks > 20 and m.action.active
        assert m.conformance.total == 0, m.last_violations


def test_a_killed_instances_robot_is_taken_over_and_handed_back(fleet):
    m = fleet.monitors['robot2']
    stops = []
    m.create_subscription(
        Bool,
        '/robot2/safety/stop',
        lambda msg: stops.append(msg.data),
        10,
    )
    fleet.spin_for(1.0)
    stops.clear()
    other = fleet.monitors['robot1']  # on the surviving instance throughout: the yardstick
    chunks, others = m.chunks, other.chunks
    t_kill = time.monotonic()
    dead = fleet.kill_child('instance/i1', signal.SIGKILL)
    fleet.spin_for(5.0, until=lambda: fleet.watch.serves('i0', ['robot1', 'robot2']))
    took = time.monotonic() - t_kill
    assert fleet.watch.serves('i0', ['robot1', 'robot2']), fleet.watch.latest['i0']
    assert took < 1.0, took
    # both robots in one forward (on some tick: on a loaded host one robot's tick may
    # degrade, e.g. stale, and the latest forward then decodes the other alone)
    fleet.spin_for(2.0, until=lambda: fleet.watch.latest['i0'].batch_size == 2)
    assert fleet.watch.latest['i0'].batch_size == 2, fleet.watch.latest['i0']
    fleet.spin_for(max(0.0, 2.0 - (time.monotonic() - t_kill - took)))
    # robot2 driven by i0 now, as robot1 is: both at the rate the world expert's fresh
    # representations allow on this host (a loaded host holds whole seconds of `stale`
    # ticks for both robots alike), so robot2's chunks are judged against robot1's
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
    # the rule: no safety stop when the takeover is faster than the gate's
    # chunk_timeout_s (0.25 s); a loaded host's slower takeover (p99 274 ms in the drill,
    # a known miss) may stop the robot, and then only
    assert not any(stops) or took > 0.25, f'the {took:.3f} s takeover tripped a safety stop'
    # the standby node reports as robot2's action_expert: its gate hears it (OK, or WARN
    # for degraded ticks on a loaded host; never the ERROR a gate stops on)
    assert m.action is not None and m.action.active and m.action.level < 2, m.action.message
    handback = len(stops)  # from here on: the handback, which must never stop the robot
    dead.wait(timeout=10)
    fleet.start_instance('i1')
    fleet.spin_for(90.0, until=lambda: fleet.watch.serves('i1', ['robot2']))
    assert fleet.watch.serves('i1', ['robot2'])
    fleet.spin_for(1.0)
    assert list(fleet.watch.latest['i0'].serving_robots) == ['robot1']
    chunks, others = m.chunks, other.chunks
    fleet.spin_for(2.0)
    # (a fresh-clone run saw the restarted i1 claim robot2 before its joint states
    # arrived, hold it and trip the gate: i1 now claims a robot once its inputs are in)
    assert not any(stops[handback:]), 'the handback tripped a safety stop'
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
    assert m.conformance.total == 0


def test_a_release_switch_reaches_the_standbys_so_a_takeover_after_it_serves_the_release(
    fleet, tmp_path
):
    """A switch loads, arms and confirms each robot's standby node too (found from the
    instances' heartbeats, as the release command line finds them: no waiting here), and
    a confirmed standby serves the release from its instance's next tick; a rollback
    before the confirm leaves it on the release rolled back to. Killed after the switch,
    robot1's primary instance (i0) hands robot1 to i1's standby, which decodes the new
    world version with the new model (before, it kept the launch model and held the
    robot on `version_mismatch`). Last in the module: it leaves the fleet switched."""
    from robot_agent.release_manager import ReleaseManager
    from wam_core.common.paths import resolve_path
    from wam_core.releases.registry import Registry
    from wam_system_tests.releases_drill import _in_background, write_reseeded_pair

    reg = Registry(fleet.releases_db)
    world, action = write_reseeded_pair(str(tmp_path / 'reseed'), 11)
    reg.register('reseed', world, action, TABLETOP_ARM, 'instances test', actor='test')
    shipped = resolve_path('models/world_expert'), resolve_path('models/action_expert')
    reg.register('shipped', *shipped, TABLETOP_ARM, 'instances test', actor='test')
    reseed, back = reg.get('reseed'), reg.get('shipped')
    robots = ['robot1', 'robot2']
    mgr = ReleaseManager(robots, log=lambda m: None)

    def standbys_serve():
        fleet.spin_for(0.2)  # a clock tick or more: a confirmed standby switches on it
        return [_in_background(fleet, lambda r=r: mgr.standby_release(r)) for r in robots]

    try:
        res = _in_background(fleet, lambda: mgr.switch(reseed))
        # rolled back before its confirm: the standbys' armed reseed is replaced
        _in_background(fleet, lambda: mgr.switch(back))
        _in_background(fleet, lambda: mgr.confirm('shipped'))
        assert standbys_serve() == ['shipped', 'shipped']
        res = _in_background(fleet, lambda: mgr.switch(reseed))
        _in_background(fleet, lambda: mgr.confirm('reseed'))
        assert standbys_serve() == ['reseed', 'reseed']
    finally:
        mgr.close()
        reg.close()
    assert res.standbys == ['robot1', 'robot2'] and set(res.switch_ms) == {'robot1', 'robot2'}
    m, other = fleet.monitors['robot1'], fleet.monitors['robot2']
    fleet.spin_for(1.0)
    assert m.action.release == 'reseed' and other.action.release == 'reseed'
    dead = fleet.kill_child('instance/i0', signal.SIGKILL)
    fleet.spin_for(5.0, until=lambda: fleet.watch.serves('i1', ['robot1', 'robot2']))
    assert fleet.watch.serves('i1', ['robot1', 'robot2']), fleet.watch.latest['i1']
    fleet.spin_for(0.5)
    chunks, others = m.chunks, other.chunks
    fleet.spin_for(2.0)
    # i1's standby node drives robot1 now, with the release's model
    assert m.action.release == 'reseed', (m.action.release, m.action.message)
    assert m.action.mixed_version_ticks == 0
    mismatch = {c.reason: c.count for c in m.action.degraded}.get('version_mismatch', 0)
    assert mismatch == 0, m.action.degraded
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
    # Restarted with its launch model (the release switched from), i0 asks i1's standby
    # which release drives robot1, loads it, and only then takes robot1 back: before, it
    # left robot1 with i1 for good (a fleet that never rebalanced after a switch), and had
    # the two releases shared a world version it would have driven robot1 with the old
    # action expert. Its standby node for robot2 loads robot2's release the same way.
    stops = []
    m.create_subscription(Bool, '/robot1/safety/stop', lambda msg: stops.append(msg.data), 10)
    dead.wait(timeout=10)
    t_restart = time.monotonic()
    fleet.start_instance('i0')
    fleet.spin_for(90.0, until=lambda: fleet.watch.heard.get('i0', 0.0) > t_restart)
    assert fleet.watch.heard.get('i0', 0.0) > t_restart, 'the restarted i0 never beat'
    fleet.spin_for(30.0, until=lambda: fleet.watch.serves('i0', ['robot1']))
    assert fleet.watch.serves('i0', ['robot1']), (fleet.watch.latest['i0'], m.action.message)
    assert fleet.watch.serves('i1', ['robot2']), fleet.watch.latest['i1']
    fleet.spin_for(1.0)
    chunks, others = m.chunks, other.chunks
    fleet.spin_for(2.0)
    assert m.action.release == 'reseed', (m.action.release, m.action.message)
    assert m.action.mixed_version_ticks == 0 and not any(stops)
    mismatch = {c.reason: c.count for c in m.action.degraded}.get('version_mismatch', 0)
    assert mismatch == 0, m.action.degraded
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
    mgr = ReleaseManager(robots, log=lambda m: None)
    try:
        assert _in_background(fleet, lambda: mgr.standby_release('robot2')) == 'reseed'
    finally:
        mgr.close()


def test_with_no_live_peer_a_restarted_instance_takes_the_world_experts_release(fleet):
    """Both instances killed after the switch (the previous test leaves the fleet on
    `reseed`), i0 restarted alone with its launch model: no peer drives its robots, so it
    drives robot1, and robot2 as its standby once i1 stays silent past the start-up
    grace, with the release switched from. Each node then asks the world expert which
    release it encodes its robot with and switches to it (before, the gates stopped both
    robots on the version mismatch until someone restarted i0 with the live release: a
    one-instance fleet, 2 robots by default, after any release switch)."""
    m, other = fleet.monitors['robot1'], fleet.monitors['robot2']
    assert m.action.release == 'reseed' and other.action.release == 'reseed', (
        'the previous test leaves the fleet on reseed'
    )
    dead = [fleet.kill_child(f'instance/{i}', signal.SIGKILL) for i in ('i0', 'i1')]
    for p in dead:
        p.wait(timeout=10)
    fleet.spin_for(0.5)
    t_restart = time.monotonic()
    fleet.start_instance('i0')
    fleet.spin_for(120.0, until=lambda: fleet.watch.serves('i0', ['robot1', 'robot2']))
    assert fleet.watch.serves('i0', ['robot1', 'robot2']), fleet.watch.latest.get('i0')

    def on_release():
        return all(
            x.action is not None and x.action.release == 'reseed' and not x.safety_stop
            for x in (m, other)
        )

    fleet.spin_for(60.0, until=on_release)
    assert on_release(), [(x.action.release, x.action.message, x.safety_stop) for x in (m, other)]
    fleet.spin_for(1.0)
    chunks = {x: x.chunks for x in (m, other)}
    fleet.spin_for(2.0)
    for x in (m, other):  # both driven again, on the release, the gates clear
        assert x.chunks - chunks[x] > 10, (x.chunks, chunks[x], x.action.message)
        assert x.action.mixed_version_ticks == 0 and not x.safety_stop
    assert time.monotonic() - t_restart < 180
    assert m.conformance.total == 0 and other.conformance.total == 0


def test_a_restarted_world_expert_asks_the_standby_that_drives_a_robot(fleet):
    """i1 stays down after the previous test, so robot2 is driven by its standby node on
    i0, on `reseed`. The world expert killed and restarted with its launch model asks
    robot2's action expert, which does not answer, then the standby node that drives
    robot2, and encodes robot2's frames with `reseed` again (before, it asked only the
    action expert, encoded robot2 with its launch release until i1 came back, and the
    gate stopped robot2 on the version mismatch meanwhile)."""
    m, other = fleet.monitors['robot2'], fleet.monitors['robot1']
    assert fleet.watch.serves('i0', ['robot1', 'robot2']), 'the previous test leaves i0 alone'
    assert m.action.release == 'reseed', m.action.release
    dead = fleet.kill_child('world', signal.SIGKILL)
    dead.wait(timeout=10)
    fleet.spin_for(0.5)
    for x in (m, other):  # from here on: the restarted world expert's statuses only
        x.status.world = None
    fleet.start_child('world')

    def version(x, robot):  # the world version the world expert encodes robot with
        per = [] if x.world is None else x.world.per_robot
        return next((e.model_version for e in per if e.robot == robot), None)

    robots = {'robot2': m, 'robot1': other}

    def encoded_again():
        return all(
            version(x, r) == x.action.world_version_accepted and not x.safety_stop
            for r, x in robots.items()
        )

    fleet.spin_for(120.0, until=encoded_again)
    assert encoded_again(), [
        (version(x, r), x.action.world_version_accepted, x.action.message, x.safety_stop)
        for r, x in robots.items()
    ]
    fleet.spin_for(1.0)
    chunks = {x: x.chunks for x in (m, other)}
    fleet.spin_for(2.0)
    for x in (m, other):
        assert x.chunks - chunks[x] > 10, (x.chunks, chunks[x], x.action.message)
        assert x.action.release == 'reseed' and not x.safety_stop


def test_a_switch_while_an_instance_is_down_reaches_the_standby_that_drives_its_robot(fleet):
    """i1 stays down after the previous test: robot2 is driven by its standby node on i0,
    on `reseed`. A rollback to `shipped` now loads, arms and confirms that standby in
    robot2's action expert's place (before, the release manager asked only robot2's
    action expert, which is dead, and the switch failed after 10 s: no rollback while an
    instance was down). Restarted, i1 takes robot2 back on `shipped`."""
    from robot_agent.release_manager import ReleaseManager
    from wam_core.releases.registry import Registry
    from wam_system_tests.releases_drill import _in_background

    m, other = fleet.monitors['robot2'], fleet.monitors['robot1']
    assert fleet.watch.serves('i0', ['robot1', 'robot2']), 'the previous test leaves i0 alone'
    assert m.action.release == 'reseed', m.action.release
    reg = Registry(fleet.releases_db)
    shipped = reg.get('shipped')
    reg.close()
    mgr = ReleaseManager(['robot1', 'robot2'], log=lambda m: None)
    try:
        res = _in_background(fleet, lambda: mgr.switch(shipped))
        _in_background(fleet, lambda: mgr.confirm('shipped'))
    finally:
        mgr.close()
    assert set(res.switch_ms) == {'robot1', 'robot2'} and res.standbys == [], res
    fleet.spin_for(1.0)
    chunks, others = m.chunks, other.chunks
    fleet.spin_for(2.0)
    for x in (m, other):
        assert x.action.release == 'shipped' and not x.safety_stop, x.action.message
        assert x.action.mixed_version_ticks == 0
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
    t_restart = time.monotonic()
    fleet.start_instance('i1')
    fleet.spin_for(90.0, until=lambda: fleet.watch.heard.get('i1', 0.0) > t_restart)
    fleet.spin_for(30.0, until=lambda: fleet.watch.serves('i1', ['robot2']))
    assert fleet.watch.serves('i1', ['robot2']), (fleet.watch.latest.get('i1'), m.action.message)
    fleet.spin_for(1.0)
    chunks, others = m.chunks, other.chunks
    fleet.spin_for(2.0)
    assert m.action.release == 'shipped' and not m.safety_stop, m.action.message
    mismatch = {c.reason: c.count for c in m.action.degraded}.get('version_mismatch', 0)
    assert mismatch == 0, m.action.degraded
    assert m.chunks - chunks > max(10, 0.5 * (other.chunks - others)), (m.chunks, other.chunks)
