"""World encoding service and the action tick, without ROS."""

import time

import numpy as np
import pytest
import torch

from wam_core.cache.inprocess import InProcessCache
from wam_core.models.registry import load_action_expert, load_world_expert
from wam_core.serving.action_ticker import ActionTicker, Descriptor
from wam_core.serving.frame_encoder import FrameEncoder
from wam_core.serving.image import ImageError
from wam_sim.synthetic import SyntheticScene


@pytest.fixture(scope='module')
def experts(models):
    world = load_world_expert(models['world_dir'], 'fp32')
    action = load_action_expert(models['action_dir'])
    return world, action, action.manifest


def _frame(scene, i):
    return scene.frame(i).tobytes()


def test_each_distinct_frame_is_encoded_exactly_once(experts):
    world, _, _ = experts
    cache = InProcessCache(16, 1000, world.version)
    enc = FrameEncoder(world, cache)
    scene = SyntheticScene(128)
    a, b = _frame(scene, 1), _frame(scene, 2)
    calls0 = world.calls
    outs = [enc.process('rgb8', 128, 128, 384, f, time.time_ns()) for f in (a, a, b, a, b, b)]
    assert world.calls - calls0 == 2
    assert [o.cache_hit for o in outs] == [False, True, False, True, True, True]
    assert outs[0].entry.key == outs[3].entry.key and outs[0].entry.key != outs[2].entry.key
    assert enc.frames == 6 and enc.hits == 4


def test_bad_frames_are_counted_by_reason(experts):
    world, _, _ = experts
    enc = FrameEncoder(world, InProcessCache(4, 1000, world.version))
    for args in [
        ('mono8', 4, 4, 4, bytes(16)),
        ('rgb8', 4, 4, 12, b''),
        ('rgb8', 4, 4, 12, bytes(47)),
    ]:
        with pytest.raises(ImageError):
            enc.process(*args, stamp_ns=0)
    assert enc.rejected == {'encoding': 1, 'empty': 1, 'length': 1}
    assert enc.frames == 0


def test_frames_stamped_in_the_future_or_past_the_ttl_are_refused(experts):
    world, _, _ = experts
    enc = FrameEncoder(
        world, InProcessCache(4, 1000, world.version), max_age_ms=50.0, max_future_ms=100.0
    )
    f = _frame(SyntheticScene(128), 1)
    now = time.time_ns()
    for stamp in (now + int(5e9), now - int(5e9), 0):
        with pytest.raises(ImageError, match='stamp'):
            enc.process('rgb8', 128, 128, 384, f, stamp)
    assert enc.rejected == {'stamp_future': 1, 'stamp_old': 2} and enc.frames == 0
    assert not enc.process('rgb8', 128, 128, 384, f, time.time_ns()).cache_hit


def test_a_repeated_frame_while_the_arm_moves_is_a_frozen_camera(experts):
    """A static scene reuses its representation; the same pixels after the arm moved
    between the two frames' stamps do not, and the picture the camera repeats is withdrawn
    from the readers at once."""
    world, _, _ = experts
    cache = InProcessCache(4, 1000, world.version)
    enc = FrameEncoder(world, cache)
    f = _frame(SyntheticScene(128), 1)
    t0 = time.time_ns()
    for k in range(4):  # still arm: joint states every 10 ms
        enc.joint_state(t0 + k * 10_000_000, np.zeros(7))
    first = enc.process('rgb8', 128, 128, 384, f, t0).entry
    enc.joint_state(t0 + 40_000_000, np.full(7, 0.0002))  # sensor noise: a static scene
    assert enc.process('rgb8', 128, 128, 384, f, t0 + 33_000_000).cache_hit
    # by arrival the arm has moved since (a braking arm, a queued frame), yet at the
    # repeat's stamp it had not: still a static scene
    enc.joint_state(t0 + 70_000_000, np.full(7, 0.05))
    assert enc.process('rgb8', 128, 128, 384, f, t0 + 36_000_000).cache_hit
    # the arm moved 0.8 mrad between the stamps, the picture did not
    enc.joint_state(t0 + 80_000_000, np.full(7, 0.0008))
    with pytest.raises(ImageError, match='0.8 mrad'):
        enc.process('rgb8', 128, 128, 384, f, t0 + 80_000_000)
    assert enc.rejected == {'frozen': 1} and enc.retracted == 1
    res = cache.read(first.slot, world.version, key=first.key)
    assert not res.ok and res.reason == 'stale'  # within its 1 s TTL, yet refused
    assert not cache.latest(world.version).ok
    with pytest.raises(ImageError, match='frozen'):  # still frozen, withdrawn only once
        enc.process('rgb8', 128, 128, 384, f, t0 + 75_000_000)
    assert enc.retracted == 1
    # a repeat the joint states cannot tell about (stamped long before the newest: another
    # time line) does not bring the withdrawn picture back
    with pytest.raises(ImageError, match='withdrawn'):
        enc.process('rgb8', 128, 128, 384, f, t0 - 300_000_000)
    assert not cache.latest(world.version).ok
    g = _frame(SyntheticScene(128), 2)  # a new picture: serving again
    assert not enc.process('rgb8', 128, 128, 384, g, t0 + 80_000_000).cache_hit


def test_without_joint_states_near_its_stamps_a_repeat_is_not_judged(experts):
    """No joint state within 30 ms of a frame's stamp: the check cannot tell, and a static
    scene must not be refused for it."""
    world, _, _ = experts
    enc = FrameEncoder(world, InProcessCache(4, 1000, world.version))
    f = _frame(SyntheticScene(128), 1)
    t0 = time.time_ns()
    enc.process('rgb8', 128, 128, 384, f, t0)
    enc.joint_state(t0 + 200_000_000, np.full(7, 1.0))
    assert enc.process('rgb8', 128, 128, 384, f, t0 + 33_000_000).cache_hit


def _ticker(experts, clock_cache):
    world, action, manifest = experts
    t = ActionTicker(action, clock_cache, manifest.extra['world_version'], 7, 384)
    return t


def test_tick_produces_a_chunk_and_reuses_the_prepared_scene(experts):
    world, action, _ = experts
    cache = InProcessCache(8, 1000, world.version)  # TTL out of the way: this is about reuse
    e = cache.put('ab' * 16, time.time_ns(), world.encode(SyntheticScene(128).frame(0)))
    t = _ticker(experts, cache)
    t.set_joint_state(np.linspace(-0.3, 0.3, 7))
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    results = [t.tick() for _ in range(5)]
    assert all(r.kind == 'chunk' for r in results)
    assert results[0].positions.shape == (16, 7)
    assert t.prepares == 1  # prepared once for five ticks
    # Reusing the prepared scene changes nothing: same as the unified forward.
    with torch.inference_mode():
        rep = torch.from_numpy(np.array(cache.read(e.slot, world.version).array)).unsqueeze(0)
        unified = action.module(
            rep,
            torch.from_numpy(np.linspace(-0.3, 0.3, 7).astype(np.float32))[None],
            torch.zeros(1, 384),
        )[0].numpy()
    assert np.allclose(results[-1].positions, unified, atol=1e-5)
    assert np.all(
        np.abs(results[0].positions - np.linspace(-0.3, 0.3, 7))
        <= action.module.config.max_delta + 1e-6
    )


def test_stale_representation_degrades_and_computes_nothing(experts):
    world, _, _ = experts
    cache = InProcessCache(8, 50, world.version)
    e = cache.put(
        'ab' * 16, time.time_ns() - 80_000_000, world.encode(SyntheticScene(128).frame(0))
    )
    t = _ticker(experts, cache)
    q = np.linspace(-0.2, 0.2, 7)
    t.set_joint_state(q)
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    r = t.tick()
    assert r.kind == 'degraded' and r.reason == 'stale' and r.positions is None
    assert t.degraded == {'stale': 1} and t.chunks == 0 and t.prepares == 0


def test_other_model_version_is_never_served(experts):
    world, _, _ = experts
    cache = InProcessCache(8, 50, 'some-other-version')
    e = cache.put('ab' * 16, time.time_ns(), world.encode(SyntheticScene(128).frame(0)))
    t = _ticker(experts, cache)
    t.set_joint_state(np.zeros(7))
    t.set_descriptor(Descriptor(e.key, e.version, e.slot))
    assert t.tick().reason == 'version_mismatch'
    t.set_descriptor(None)
    assert t.tick().reason == 'version_mismatch'  # 'latest' path checks too
    assert t.chunks == 0


def test_no_joint_state_means_no_output(experts):
    world, _, _ = experts
    t = _ticker(experts, InProcessCache(8, 50, world.version))
    r = t.tick()
    assert r.kind == 'degraded' and r.positions is None and r.reason == 'no_joint_state'


def test_subtask_vector_is_validated(experts):
    world, _, _ = experts
    t = _ticker(experts, InProcessCache(8, 50, world.version))
    with pytest.raises(ValueError):
        t.set_subtask(np.zeros(5))
    with pytest.raises(ValueError):
        t.set_subtask(np.full(384, np.nan))
    t.set_subtask(np.ones(384))
