"""The cache's freshness rule (issue 26): ttl_ms auto is a camera period plus the world
expert's budget, the period measured from the stamps."""

import math

import pytest

from wam_core.cache.freshness import (
    INITIAL_AUTO_TTL_MS,
    CameraPeriod,
    Freshness,
    expected_ttl_ms,
    initial_ttl_ms,
    read_on_the_stamping_clock,
    stale_bound_s,
    valid_announced_ttl,
)
from wam_core.common.config import ActionExpertParams, WorldExpertParams
from wam_core.common.params import from_flat

MS = 1_000_000


def stamps(period_ms: float, n: int, start: int = 10**18):
    return [start + int(i * period_ms * MS) for i in range(n)]


def test_the_configured_rate_holds_until_enough_frames_arrived():
    cam = CameraPeriod(30.0)
    for s in stamps(50.0, 5):  # 4 intervals: not enough
        cam.observe(s)
    assert cam.period_ms == pytest.approx(1000 / 30)
    cam.observe(10**18 + 5 * 50 * MS)
    assert cam.period_ms == pytest.approx(50.0)


def test_the_median_ignores_a_dropped_frame_and_repeats():
    cam = CameraPeriod(30.0)
    ts = stamps(1000 / 30, 20)
    del ts[10]  # one dropped frame: a double interval
    for s in ts:
        cam.observe(s)
        assert not cam.observe(s)  # the same stamp again is ignored
    cam.observe(ts[3])  # out of order: ignored
    assert cam.period_ms == pytest.approx(1000 / 30, abs=0.01)


def test_a_failing_camera_does_not_stretch_the_ttl_past_twice_its_period():
    cam = CameraPeriod(30.0)
    for s in stamps(500.0, 10):  # 2 Hz: the world expert's status warns of it
        cam.observe(s)
    assert cam.period_ms == pytest.approx(2 * 1000 / 30)


def test_auto_is_a_period_plus_the_world_budget_and_a_number_wins():
    fresh = Freshness('auto', 30.0, 40.0)
    assert fresh.ttl_ms == pytest.approx(1000 / 30 + 40)
    for s in stamps(20.0, 12):  # a 50 Hz camera
        fresh.observe(s)
    assert fresh.ttl_ms == pytest.approx(60.0)
    fixed = Freshness(50.0, 30.0, 40.0)
    for s in stamps(20.0, 12):
        fixed.observe(s)
    assert fixed.ttl_ms == 50.0


def test_drills_and_readers_use_the_same_rule():
    world, action = WorldExpertParams(), ActionExpertParams()
    assert world.repr_cache.ttl_ms == 'auto' == action.repr_cache.ttl_ms  # the default
    assert expected_ttl_ms(world, action) == pytest.approx(1000 / 30 + 40)
    assert initial_ttl_ms('auto') == INITIAL_AUTO_TTL_MS and initial_ttl_ms(80.0) == 80.0
    fixed = from_flat(ActionExpertParams, {'repr_cache.ttl_ms': 50.0})
    assert expected_ttl_ms(world, fixed) == 50.0
    assert stale_bound_s(50.0, 0.02) == pytest.approx(0.07)


@pytest.mark.parametrize('ttl', [math.nan, math.inf, -1.0, 0.05, 1e6])
def test_an_announced_ttl_outside_the_parameters_range_is_refused(ttl):
    assert not valid_announced_ttl(ttl)
    assert valid_announced_ttl(73.3)


def test_a_chunk_is_stamped_on_the_clock_its_representation_was_judged_on():
    obs = 1_000_000_000_000  # ns
    tick = obs / 1e9 + 0.030  # the tick: 30 ms after the picture
    # read 2 ms after the tick (age 32 ms), stamped 5 ms after the tick: one clock
    assert read_on_the_stamping_clock(obs, tick, read_age_ms=32.0, since_tick_ms=5.0)
    assert not read_on_the_stamping_clock(obs, tick + 0.5, 32.0, 5.0)  # stepped forward
    assert not read_on_the_stamping_clock(obs, tick - 0.5, 32.0, 5.0)  # ... or back
    # an off-tick decode read 60 ms after its grid point: still one clock
    assert read_on_the_stamping_clock(obs, tick, read_age_ms=90.0, since_tick_ms=70.0)
    # a TTL that changed meanwhile does not matter: only the clock does
    assert read_on_the_stamping_clock(obs, obs / 1e9 + 0.0725, 73.0, 3.0)
