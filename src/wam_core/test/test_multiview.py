"""Several camera views as one observation: gathered by stamp, encoded together in one
forward pass, fingerprinted over every view (encode once per distinct observation)."""

import time

import numpy as np
import pytest
import torch

from wam_core.cache.inprocess import InProcessCache
from wam_core.models.contract import Observation, check_pair
from wam_core.models.default_models import write_default_models
from wam_core.models.registry import load_action_expert, load_world_expert
from wam_core.serving.fleet_encoder import FleetEncoder, Frame
from wam_core.serving.frame_encoder import FrameEncoder
from wam_core.serving.image import ImageError
from wam_core.serving.view_sync import ViewSync

MS = 1_000_000


def test_views_within_the_tolerance_form_one_observation():
    sync = ViewSync(['front', 'wrist'], 15 * MS)
    assert sync.put('front', 100 * MS, 'f1') is None
    assert sync.put('wrist', 108 * MS, 'w1') == {'front': 'f1', 'wrist': 'w1'}
    assert sync.observations == 1
    # too far apart: no observation; once a partner pairs a newer frame, the older
    # unpaired one is a lost observation, counted against the view it waited for
    assert sync.put('front', 200 * MS, 'f2') is None
    assert sync.put('wrist', 240 * MS, 'w2') is None
    assert sync.put('front', 300 * MS, 'f3') is None
    assert sync.put('wrist', 301 * MS, 'w3') == {'front': 'f3', 'wrist': 'w3'}
    assert sync.missing == {'front': 1, 'wrist': 1}  # f2 lacked a wrist, w2 a front
    with pytest.raises(KeyError):
        sync.put('left', 0, 'x')


def test_a_camera_a_frame_late_still_pairs():
    sync = ViewSync(['front', 'wrist'], 15 * MS)
    assert sync.put('front', 0, 'f0') is None
    assert sync.put('front', 33 * MS, 'f1') is None
    assert sync.put('wrist', 1 * MS, 'w0') == {'front': 'f0', 'wrist': 'w0'}  # late, paired
    assert sync.put('wrist', 34 * MS, 'w1') == {'front': 'f1', 'wrist': 'w1'}
    assert sync.missing == {'front': 0, 'wrist': 0} and sync.observations == 2


def test_a_stalled_view_is_counted_by_name():
    sync = ViewSync(['front', 'wrist'], 15 * MS, depth=4)
    for k in range(10):
        assert sync.put('front', k * 33 * MS, k) is None
    assert sync.missing['wrist'] == 6 and sync.observations == 0  # 10 frames, 4 still held


@pytest.fixture(scope='module')
def two_view(tmp_path_factory):
    info = write_default_models(str(tmp_path_factory.mktemp('m2')), views=('front', 'wrist'))
    world = load_world_expert(info['world_dir'])
    action = load_action_expert(info['action_dir'])
    return world, action


def _frame(view, img, stamp):
    return Frame('rgb8', 128, 128, 384, img.tobytes(), stamp, None, view)


def test_a_two_view_pair_fits_and_encodes_both_views_in_one_forward(two_view):
    world, action = two_view
    check_pair(world, action)
    assert world.spec.view_names == ('front', 'wrist') and world.spec.shape == (130, 192)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 256, (128, 128, 3), dtype=np.uint8) for _ in range(2))
    f0 = world.forwards
    rep = world.encode(Observation({'front': a, 'wrist': b}))
    assert rep.shape == (130, 192) and world.forwards == f0 + 1
    # each half is that view alone
    assert np.allclose(rep[:65], world.encode(Observation({'front': a, 'wrist': a}))[:65])
    scene = action.prepare(torch.from_numpy(rep)[None])
    assert scene.objects.shape == (1, 5)


def test_the_fingerprint_covers_every_view(two_view):
    world, _ = two_view
    enc = FrameEncoder(world, InProcessCache(8, 10_000, world.version))
    fleet = FleetEncoder(world, {'': enc})
    rng = np.random.default_rng(1)
    front, wrist, wrist2 = (rng.integers(0, 256, (128, 128, 3), dtype=np.uint8) for _ in range(3))
    now = time.time_ns()

    def observe(w, stamp):
        f = _frame('front', front, stamp)
        f.others = {'wrist': _frame('wrist', w, stamp)}
        ((_, _, out),) = fleet.encode([('', f)])
        return out

    assert not observe(wrist, now).cache_hit
    assert observe(wrist, now + 1).cache_hit  # the same two frames: encoded once
    assert not observe(wrist2, now + 2).cache_hit  # only the wrist view changed: new
    assert enc.world_calls == 2 and enc.calls_per_frame() == pytest.approx(1.0)
    lone = _frame('front', front, now + 3)  # the wrist view missing
    ((_, _, out),) = fleet.encode([('', lone)])
    assert isinstance(out, ImageError) and enc.rejected == {'view_missing': 1}
