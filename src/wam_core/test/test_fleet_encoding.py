"""One world expert for a fleet: the batching window and batched encode-once, without ROS."""

import time

import numpy as np
import pytest

from wam_core.cache.factory import segment_name
from wam_core.cache.inprocess import InProcessCache
from wam_core.cache.protocol import CacheError
from wam_core.models.world_expert import WorldExpert
from wam_core.serving.batch_window import BatchWindow
from wam_core.serving.fleet_encoder import FleetEncoder, Frame
from wam_core.serving.frame_encoder import FrameEncoder
from wam_core.serving.image import ImageError
from wam_sim.synthetic import SyntheticScene


def test_window_goes_when_full_or_when_the_oldest_waited_the_window():
    w = BatchWindow(max_size=4, max_wait_s=0.002, members=3)
    assert w.max_size == 3  # never waits for a fourth robot that does not exist
    assert w.due_in(0.0) is None
    w.put('a', 1, now=0.0)
    assert w.due_in(0.0005) == pytest.approx(0.0015)
    w.put('b', 2, now=0.001)
    w.put('a', 3, now=0.0015)  # newer frame of a: replaces, keeps a's place in the window
    assert w.superseded == 1
    assert w.due_in(0.0015) == pytest.approx(0.0005)  # a arrived at 0.0
    assert w.due_in(0.0021) == 0.0  # a waited the whole window: go without c
    assert w.take() == [('a', 3), ('b', 2)]
    w.put('c', 4, 0.01)
    w.put('a', 5, 0.0101)
    w.put('b', 6, 0.0102)
    assert w.due_in(0.0102) == 0.0  # all three robots are in: no reason to wait
    assert [r for r, _ in w.take()] == ['c', 'a', 'b']
    assert w.batch_mean == 2.5


def test_lone_robot_never_waits():
    w = BatchWindow(max_size=4, max_wait_s=1.0, members=1)
    w.put('', 'frame', 0.0)
    assert w.due_in(0.0) == 0.0


def test_segments_are_per_robot():
    assert segment_name('wam_repr') == 'wam_repr'
    assert segment_name('wam_repr', 'robot1') == 'wam_repr_robot1'
    assert segment_name('wam_repr', 'lab/arm') == 'wam_repr_lab_arm'


@pytest.fixture(scope='module')
def world(models):
    return WorldExpert(models['world_dir'], 'fp32')


def _frame(scene, i, stamp=None):
    data = scene.frame(i).tobytes()
    return Frame('rgb8', 128, 128, 384, data, stamp or time.time_ns())


def test_batched_encode_equals_one_by_one_and_counts_one_call_per_distinct_frame(world):
    robots = ['r1', 'r2', 'r3']
    caches = {r: InProcessCache(16, 1000, world.version) for r in robots}
    fleet = FleetEncoder(world, {r: FrameEncoder(world, caches[r]) for r in robots})
    scenes = {r: SyntheticScene(128, seed=i) for i, r in enumerate(robots)}
    calls0, forwards0 = world.calls, world.forwards
    out = fleet.encode([(r, _frame(scenes[r], 1)) for r in robots])
    assert world.calls - calls0 == 3 and world.forwards - forwards0 == 1  # one pass
    for robot, _, res in out:
        alone = world.encode(scenes[robot].frame(1))
        got = caches[robot].read(res.entry.slot, world.version, res.entry.key)
        np.testing.assert_allclose(got.array, alone, atol=2e-4)
    # the same frames again: hits, no encode; r2 sends a new one; r3 a malformed one
    bad = Frame('rgb8', 128, 128, 384, b'\x00' * 10, time.time_ns())
    calls1 = world.calls
    out = fleet.encode(
        [('r1', _frame(scenes['r1'], 1)), ('r2', _frame(scenes['r2'], 2)), ('r3', bad)]
    )
    assert world.calls - calls1 == 1
    kinds = {r: type(res).__name__ for r, _, res in out}
    assert kinds == {'r1': 'EncodeOutcome', 'r2': 'EncodeOutcome', 'r3': 'ImageError'}
    assert isinstance(dict((r, res) for r, _, res in out)['r3'], ImageError)
    for r in robots:
        enc = fleet.encoders[r]
        assert enc.calls_per_frame() == 1.0, r
    # each robot's cache holds only its own robot's representations
    r2_new = dict((r, res) for r, _, res in out)['r2'].entry
    assert caches['r2'].lookup(r2_new.fingerprint) is not None
    assert caches['r1'].lookup(r2_new.fingerprint) is None


class _DownCache(InProcessCache):
    """A cache whose writes fail (a remote store that went away)."""

    def put(self, fingerprint, stamp_ns, array):
        raise CacheError('store down')


def test_one_robots_cache_failure_costs_no_other_robot_its_representation(world):
    caches = {
        'r1': InProcessCache(16, 1000, world.version),
        'r2': _DownCache(16, 1000, world.version),
    }
    fleet = FleetEncoder(world, {r: FrameEncoder(world, c) for r, c in caches.items()})
    out = dict(
        (r, res)
        for r, _, res in fleet.encode(
            [(r, _frame(SyntheticScene(128, seed=i), 3)) for i, r in enumerate(caches)]
        )
    )
    assert type(out['r1']).__name__ == 'EncodeOutcome'
    assert isinstance(out['r2'], CacheError)
    # the frame was encoded once and counted: calls per distinct frame stays exact
    assert fleet.encoders['r2'].calls_per_frame() == 1.0
    assert fleet.encoders['r1'].calls_per_frame() == 1.0
