from wam_core.common.config import SafetyConfig
from wam_core.common.status import ERROR, OK, STALE, WARN
from wam_core.control.safety import SafetyMonitor, late_chunk, node_of, resolve_node

CFG = SafetyConfig(
    required_nodes=['world_expert', 'action_expert'],
    silence_timeout_s=3.0,
    chunk_hold_s=0.045,
    chunk_timeout_s=0.1,
    holdoff_s=2.0,
)


def _started(now=0.0):
    m = SafetyMonitor(CFG, now)
    assert m.stopped and 'starting' in m.reason  # nothing moves before the nodes report
    _ok(m, now)
    assert m.reset(now)[0] and not m.stopped
    return m


def _ok(m, now):
    m.on_status('world_expert: world expert', OK, 'encoding', now)
    m.on_status('action_expert: action expert', OK, 'serving', now)
    m.on_versions(now, world='v1', accepted='v1')
    m.on_chunk(now)


def test_late_chunk():
    ms = 1_000_000
    stamp = 10_000 * ms
    fresh = dict(last_point_s=0.3, max_late_s=0.15, min_ahead_s=0.04)
    assert late_chunk(stamp, now_ns=stamp - 40 * ms, **fresh) is None  # stamped ahead
    assert late_chunk(stamp, now_ns=stamp + 150 * ms, **fresh) is None
    assert 'point 0 applied 151 ms' in late_chunk(stamp, now_ns=stamp + 151 * ms, **fresh)
    assert late_chunk(0, now_ns=stamp + 10_000 * ms, **fresh) is None  # "start on receipt"
    short = dict(last_point_s=0.05, max_late_s=0.15, min_ahead_s=0.04)
    assert late_chunk(stamp, now_ns=stamp + 10 * ms, **short) is None
    assert 'last point is 39 ms' in late_chunk(stamp, now_ns=stamp + 11 * ms, **short)


def test_fleet_identity_one_robots_fault_stops_only_that_robot():
    assert resolve_node('action_expert', '/robot1') == 'robot1/action_expert'
    assert resolve_node('/world_expert', '/robot1') == 'world_expert'
    assert resolve_node('action_expert', '/') == 'action_expert'
    assert node_of('action_expert: action expert', '/robot1/action_expert') == (
        'robot1/action_expert'
    )
    assert node_of('action_expert: action expert', 'fuzz') == 'action_expert'
    cfg = SafetyConfig(
        required_nodes=['/world_expert', 'action_expert'], chunk_hold_s=0.045, chunk_timeout_s=0.1
    )
    robots = {ns: SafetyMonitor(cfg, 0.0, ns) for ns in ('/robot1', '/robot2')}
    for ns, m in robots.items():
        m.on_status('world_expert: world expert', OK, '', 0.0, '/world_expert')
        m.on_status('action_expert: action expert', OK, '', 0.0, f'{ns}/action_expert')
        m.on_versions(0.0, world='v1', accepted='v1')
        m.on_chunk(0.0)
        assert m.reset(0.0)[0]
    # robot1's action expert fails: robot1 stops, robot2 does not
    for m in robots.values():
        m.on_status('action_expert: action expert', ERROR, 'boom', 0.01, '/robot1/action_expert')
    assert robots['/robot1'].stopped and not robots['/robot2'].stopped
    assert 'robot1/action_expert ERROR' in robots['/robot1'].reason
    # the shared world expert fails: every robot stops
    robots['/robot2'].on_status('world_expert: world expert', ERROR, 'x', 0.02, '/world_expert')
    assert robots['/robot2'].stopped


def test_node_of():
    assert node_of('/world_expert: world expert') == 'world_expert'


def test_error_from_required_node_stops_and_holdoff_clears():
    m = _started()
    assert not m.evaluate(0.05) and not m.stopped
    assert m.on_status('action_expert: action expert', ERROR, 'boom', 0.1)
    assert m.stopped and 'ERROR' in m.reason
    t = 0.1
    while t < 2.05:  # all OK, chunks every 50 ms
        t += 0.05
        _ok(m, t)
        m.evaluate(t)
    assert m.stopped  # hold-off (2 s from 0.15) not yet elapsed
    for _ in range(3):
        t += 0.05
        _ok(m, t)
        m.evaluate(t)
    assert not m.stopped and m.stops == 1


def test_warn_and_unrequired_nodes_do_not_stop():
    m = _started()
    m.on_status('world_expert: world expert', WARN, 'slow camera', 0.01)
    m.on_status('other_node: thing', ERROR, 'not ours', 0.01)
    m.on_chunk(0.01)
    assert not m.evaluate(0.02) and not m.stopped


def test_stale_silence_and_chunk_silence_stop():
    m = _started()
    assert m.on_status('world_expert: world expert', STALE, '', 0.01)
    m2 = _started()
    assert m2.evaluate(0.15) and 'no action chunk' in m2.reason
    m3 = _started()
    for t in range(1, 40):
        m3.on_chunk(t * 0.1)
        m3.on_status('action_expert: action expert', OK, '', t * 0.1)
    m3.evaluate(3.95)
    assert m3.stopped and 'world_expert silent' in m3.reason


def test_version_mismatch_is_an_error():
    m = _started()
    assert m.on_versions(0.01, world='v2')
    assert 'version mismatch' in m.reason


def test_reset_only_when_ok():
    m = _started()
    m.on_status('action_expert: action expert', ERROR, 'boom', 0.01)
    ok, msg = m.reset(0.02)
    assert not ok and 'boom' in msg and m.stopped
    _ok(m, 0.03)
    ok, msg = m.reset(0.03)
    assert ok and not m.stopped


def test_startup_clears_after_holdoff_without_counting_a_stop():
    m = SafetyMonitor(CFG, 0.0)
    t = 0.0
    while t < 2.5:
        t += 0.05
        _ok(m, t)
        m.evaluate(t)
    assert not m.stopped and m.stops == 0


def test_the_start_up_stop_waits_for_every_required_node_then_errs():
    """The hold-off does not clear a gate whose peers never reported; a peer slower than a
    silence timeout to come up is waited for (held, no stop counted) until
    startup_timeout_s, then it is an error."""
    m = SafetyMonitor(CFG, 0.0)  # startup_timeout_s 60 by default
    for t in (1.0, 2.5, 5.0):  # the hold-off passes, no one has reported
        assert not m.evaluate(t)
    assert (
        m.stopped
        and m.stops == 0
        and m.problems(5.0)
        == [
            'waiting for world_expert',
            'waiting for action_expert',
        ]
    )
    m.on_status('world_expert: world expert', OK, 'encoding', 6.0)
    assert m.problems(6.0) == ['waiting for action_expert']
    assert not m.reset(6.0)[0]
    assert m.problems(61.0) == ['world_expert silent for 55.0 s', 'action_expert never reported']
    _ok(m, 62.0)
    m.on_chunk(64.5)
    m.evaluate(64.5)  # OK for the hold-off (2 s here)
    assert not m.stopped and m.stops == 0  # it came: the start-up stop cleared


def test_chunk_gap_holds_once_then_stops_if_it_persists():
    m = SafetyMonitor(
        SafetyConfig(
            required_nodes=['world_expert', 'action_expert'],
            chunk_hold_s=0.045,
            chunk_timeout_s=0.1,
            holdoff_s=0.5,
        ),
        0.0,
    )
    _ok(m, 0.0)
    assert m.reset(0.0)[0]
    assert not m.gap_hold_due(0.04)  # within one missed tick: nothing
    assert m.gap_hold_due(0.05) and m.gap_holds == 1  # the gap: one hold at once
    assert not m.gap_hold_due(0.06) and not m.stopped  # only once per gap, not yet a stop
    m.on_chunk(0.07)  # chunks resume: no stop, no hold-off
    assert not m.evaluate(0.08) and not m.stopped
    assert not m.gap_hold_due(0.1)
    assert m.gap_hold_due(0.12) and m.gap_holds == 2  # a new gap holds again
    assert m.evaluate(0.18) and m.stopped and 'no action chunk' in m.reason
    assert not m.gap_hold_due(0.3)  # stopped: the stop already held the robot


def test_a_forwarded_chunk_running_out_is_a_gap_even_while_chunks_arrive():
    m = SafetyMonitor(
        SafetyConfig(
            required_nodes=['world_expert', 'action_expert'],
            chunk_hold_s=0.15,
            chunk_timeout_s=0.25,
        ),
        0.0,
    )
    _ok(m, 0.0)
    assert m.reset(0.0)[0]
    m.on_chunk(0.0)
    m.on_forwarded(0.3)  # the robot has 300 ms of command
    assert not m.gap_hold_due(0.1)  # silent for less than the open-loop budget + margin
    assert m.gap_hold_due(0.16) and m.gap_holds == 1  # silent too long: hold
    m.on_chunk(0.2)
    m.on_forwarded(0.21)  # a short chunk (a hold's horizon is its braking time)
    assert not m.gap_hold_due(0.205)
    assert m.gap_hold_due(0.22) and m.gap_holds == 2  # it ran out: hold, though not silent


def test_the_hold_must_come_before_the_stop():
    import pytest

    from wam_core.common.params import ConfigError

    cfg = SafetyConfig(chunk_hold_s=0.3, chunk_timeout_s=0.25)
    with pytest.raises(ConfigError, match='chunk_timeout_s'):
        cfg.validate()
