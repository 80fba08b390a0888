"""The instance roster: which robots an action-expert instance ticks, from heartbeats."""

import pytest

from wam_core.serving.failover import InstanceRoster


def pair(now=0.0):
    """i0 primary for r1, r2 and standby for r3, r4; i1 the other way round."""
    i0 = InstanceRoster('i0', ('r1', 'r2'), ('r3', 'r4'), ('i1',), 0.1, 5.0, started=now)
    i1 = InstanceRoster('i1', ('r3', 'r4'), ('r1', 'r2'), ('i0',), 0.1, 5.0, started=now)
    return i0, i1


def beat(src: InstanceRoster, dst: InstanceRoster, now: float) -> None:
    dst.on_heartbeat(src.name, src.robots, src.serving(now), src.claimed(now), now)


def test_a_primary_waits_to_hear_its_peer_then_drives_its_own_robots_only():
    i0, i1 = pair()
    assert i0.serving(0.5) == set()  # i1 not heard yet: it might be driving r1, r2
    beat(i1, i0, 0.6)
    assert i0.serving(0.6) == {'r1', 'r2'}
    beat(i0, i1, 0.6)
    assert i1.serving(0.62) == {'r3', 'r4'}
    assert i0.takeovers == i1.takeovers == 0


def test_without_peers_heard_the_grace_ends_the_wait():
    i0, _ = pair()
    # nobody heard for 5 s: drive its own robots, and take over r3, r4 (no primary came up)
    assert i0.serving(5.01) == {'r1', 'r2', 'r3', 'r4'}
    assert 'no primary instance heard' in i0.taken['r3'].reason


def test_a_silent_primary_hands_its_robots_to_the_standby_after_the_bound():
    i0, i1 = pair()
    for t in (0.0, 0.02, 0.04):
        beat(i0, i1, t)
        beat(i1, i0, t)
    assert i1.serving(0.12) == {'r3', 'r4'}  # i0 heard 80 ms ago: still alive
    taken = i1.serving(0.15)  # 110 ms of silence: kill -9
    assert taken == {'r1', 'r2', 'r3', 'r4'}
    assert i1.takeovers == 2 and 'i0 silent for 110 ms' in i1.taken['r1'].reason


def test_a_restarted_primary_takes_its_robots_back_without_two_drivers_at_once():
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    assert i1.serving(0.2) == {'r1', 'r2', 'r3', 'r4'}  # i0 died
    back = InstanceRoster('i0', ('r1', 'r2'), ('r3', 'r4'), ('i1',), 0.1, 5.0, started=1.0)
    # starting (it has not heard i1 yet): it claims nothing, and i1 keeps its robots
    assert back.serving(1.1) == set() and back.claimed(1.1) == set()
    beat(back, i1, 1.1)
    assert i1.serving(1.1) == {'r1', 'r2', 'r3', 'r4'}
    beat(i1, back, 1.2)  # i1 says it serves r1, r2: back claims them, drives neither yet
    assert back.claimed(1.2) == {'r1', 'r2'} and back.serving(1.2) == set()
    beat(back, i1, 1.21)  # i1 hears the claim: lets go at once
    assert i1.serving(1.22) == {'r3', 'r4'} and i1.handbacks == 2
    beat(i1, back, 1.23)
    assert back.serving(1.23) == {'r1', 'r2'}
    # never both: at every step above at most one of them listed r1


def test_a_restarted_primary_claims_a_robot_only_once_that_robots_inputs_arrived():
    """Its subscriptions deliver a few hundred ms after its start: a robot claimed before
    its joint states arrive would be taken from the standby driving it and then held."""
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    assert i1.serving(0.2) == {'r1', 'r2', 'r3', 'r4'}  # i0 died
    back = InstanceRoster('i0', ('r1', 'r2'), ('r3', 'r4'), ('i1',), 0.1, 5.0, started=1.0)
    back.ready = {'r1'}  # r2's joint states have not arrived yet
    beat(i1, back, 1.1)
    assert back.claimed(1.1) == {'r1'}
    beat(back, i1, 1.11)
    assert i1.serving(1.12) == {'r2', 'r3', 'r4'}  # r2 stays with the standby
    beat(i1, back, 1.13)
    assert back.serving(1.13) == {'r1'}
    back.ready = {'r1', 'r2'}
    beat(back, i1, 1.14)
    assert i1.serving(1.15) == {'r3', 'r4'}
    beat(i1, back, 1.16)
    assert back.serving(1.16) == {'r1', 'r2'}


def test_a_peer_that_served_a_robot_lately_is_not_gone_for_one_late_heartbeat():
    """A restarted primary that cannot decode a robot's representations defers to the peer
    serving it (action_expert_node.instance): past the 100 ms takeover bound that peer
    is silent, not gone; only after the window asked for is it."""
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    assert i1.serving(0.2) == {'r1', 'r2', 'r3', 'r4'}  # i0 died
    back = InstanceRoster('i0', ('r1', 'r2'), ('r3', 'r4'), ('i1',), 0.1, 5.0, started=1.0)
    beat(i1, back, 1.0)
    assert back.peer_serves('r1', 1.05) and back.peer_served_within('r1', 1.05, 5.0)
    # i1's heartbeats late by 300 ms: silent past the takeover bound, served lately
    assert not back.peer_serves('r1', 1.3)
    assert back.peer_served_within('r1', 1.3, 5.0)
    assert not back.peer_served_within('r1', 6.1, 5.0)
    assert not back.peer_served_within('r9', 1.05, 5.0)  # nobody's


def test_a_restarted_primary_claims_a_driven_robot_back_only_once_its_chunks_reach_the_gate():
    """The gate discovers a restarted primary's new publisher hundreds of ms after it first
    publishes: a robot handed back before that goes without chunks at its gate."""
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    assert i1.serving(0.2) == {'r1', 'r2', 'r3', 'r4'}  # i0 died
    back = InstanceRoster('i0', ('r1', 'r2'), ('r3', 'r4'), ('i1',), 0.1, 5.0, started=1.0)
    back.linked = set()  # inputs arrived, but its chunks do not reach a gate yet
    beat(i1, back, 1.1)
    assert back.claimed(1.1) == set() and back.serving(1.1) == set()
    beat(back, i1, 1.11)
    assert i1.serving(1.12) == {'r1', 'r2', 'r3', 'r4'}  # the standby keeps driving both
    back.linked = {'r1', 'r2'}
    beat(i1, back, 1.13)
    assert back.claimed(1.13) == {'r1', 'r2'}
    beat(back, i1, 1.14)
    assert i1.serving(1.15) == {'r3', 'r4'}
    beat(i1, back, 1.16)
    assert back.serving(1.16) == {'r1', 'r2'}


def test_an_unlinked_primary_still_drives_robots_nobody_else_drives():
    """At a fleet's start nobody drives the robots: the link rule must not hold them."""
    i0, i1 = pair()
    i0.linked = set()
    beat(i1, i0, 0.6)  # i1 heard, serving nothing of i0's
    assert i0.serving(0.6) == {'r1', 'r2'}


def test_the_standby_yields_as_soon_as_the_primary_claims_again():
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    i1.serving(0.2)
    i1.on_heartbeat('i0', ('r1', 'r2'), (), ('r1', 'r2'), 0.21)  # a hung tick came back
    assert i1.serving(0.21) == {'r3', 'r4'}


def test_a_robot_both_own_and_on_standby_is_refused():
    with pytest.raises(ValueError, match='both its own and on standby'):
        InstanceRoster('i0', ('r1',), ('r1',))


def test_the_ring_layout_gives_every_robot_one_primary_and_one_standby():
    from wam_core.serving.failover import ring_layout

    plan = ring_layout(['r1', 'r2', 'r3', 'r4', 'r5'], 2)
    assert [p.robots for p in plan] == [('r1', 'r2', 'r3'), ('r4', 'r5')]
    assert [p.standby_robots for p in plan] == [('r4', 'r5'), ('r1', 'r2', 'r3')]
    assert plan[0].peers == ('i1',)
    three = ring_layout([f'r{i}' for i in range(6)], 3)
    standby = sorted(r for p in three for r in p.standby_robots)
    assert standby == sorted(r for p in three for r in p.robots)  # each robot once
    assert ring_layout(['r1'], 1)[0].standby_robots == ()
    with pytest.raises(ValueError, match='1 to 2'):
        ring_layout(['r1', 'r2'], 3)


def test_a_late_heartbeat_overlaps_the_two_for_a_beat_instead_of_dropping_the_robot():
    """A stalled executor made i1 take r1 over from a live i0: i0, which has served r1
    since its start, keeps it, and i1 lets go at i0's next heartbeat."""
    i0, i1 = pair()
    beat(i1, i0, 0.0)
    beat(i0, i1, 0.0)
    assert i0.serving(0.01) == {'r1', 'r2'}
    assert 'r1' in i1.serving(0.15)  # i0's heartbeats late at i1: a false takeover
    beat(i1, i0, 0.16)  # i1 says it serves r1
    assert i0.serving(0.16) == {'r1', 'r2'}  # kept: no gap for the robot
    beat(i0, i1, 0.17)  # i0's next heartbeat: alive and claiming
    assert i1.serving(0.17) == {'r3', 'r4'}


def own(roster: InstanceRoster, now: float) -> None:
    """The roster's own heartbeat, come back to it."""
    roster.on_heartbeat(roster.name, roster.robots, roster.serving(now), roster.claimed(now), now)


def test_a_stalled_receiver_does_not_take_a_live_peer_for_dead():
    i0, i1 = pair()
    for t in (0.0, 0.02, 0.04):
        beat(i0, i1, t)
        own(i1, t)
    # i1's executor stalls 160 ms (a loaded host): neither heartbeat is handled meanwhile
    assert i1.serving(0.2) == {'r3', 'r4'} and i1.takeovers == 0
    beat(i0, i1, 0.21)  # the backlog, then the beats go on
    own(i1, 0.21)
    assert i1.serving(0.22) == {'r3', 'r4'} and i1.takeovers == 0


def test_a_peer_silent_while_its_own_heartbeats_return_is_taken_over():
    i0, i1 = pair()
    for t in (0.0, 0.02, 0.04):
        beat(i0, i1, t)
        own(i1, t)
    for t in (0.06, 0.08, 0.10, 0.12):  # i0 killed after 0.04; i1's own keep coming
        own(i1, t)
    assert i1.serving(0.125) == {'r3', 'r4'}  # silent for 80 ms of its own beats
    own(i1, 0.15)
    assert i1.serving(0.15) == {'r1', 'r2', 'r3', 'r4'}
    assert 'i0 silent for 110 ms' in i1.taken['r1'].reason


def test_without_its_own_heartbeats_the_clock_measures_silence():
    i0, i1 = pair()
    beat(i0, i1, 0.0)
    own(i1, 0.0)
    # its own stopped coming back for longer than own_heartbeat_lost_s: it cannot tell a
    # stall from a death any more, and goes by the clock
    assert i1.serving(1.5) == {'r1', 'r2', 'r3', 'r4'}
