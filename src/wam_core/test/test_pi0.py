"""π0 served split: the world expert's prefix once per observation, the action expert's flow
steps against it, equal to transformers' own ``sample_actions``; the shared prefix is never
written; the model directory is checked against the robot before anything serves."""

import hashlib
import json
import math
import os
import shutil
import time
import uuid

import numpy as np
import pytest
import torch
from transformers import PI0ForConditionalGeneration

from wam_core.cache.inprocess import InProcessCache
from wam_core.cache.shm import ShmRingReader, ShmRingWriter, shm_path
from wam_core.common.paths import default_config
from wam_core.common.robot import TABLETOP_ARM
from wam_core.models import check
from wam_core.models.contract import Observation
from wam_core.models.manifest import ManifestError, read_manifest, write_manifest
from wam_core.models.pi0.images import Pi0Images, fitted_size
from wam_core.models.pi0.serving import ImageProcessing
from wam_core.models.pi0.write import write_pi0
from wam_core.models.registry import ModelLoadError, load_action_expert, load_world_expert
from wam_core.serving.action_ticker import ActionTicker
from wam_core.serving.frame_encoder import FrameEncoder

HOME = np.array([0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.04])


@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp('pi0')
    quiet = lambda *a: None  # noqa: E731
    return {
        1: write_pi0(str(root / 'one'), 'tiny', ('front',), log=quiet)['dir'],
        2: write_pi0(str(root / 'two'), 'tiny', ('front', 'wrist'), log=quiet)['dir'],
    }


@pytest.fixture
def segment():
    name = f'wam_test_pi0_{uuid.uuid4().hex[:10]}'
    yield name
    try:
        os.unlink(shm_path(name))
    except FileNotFoundError:
        pass


def _observation(world, seed=0, prompt='reach the red apple', size=128):
    rng = np.random.default_rng(seed)
    views = {
        v: rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for v in world.spec.view_names
    }
    return Observation(views, time.time_ns(), prompt=prompt)


@pytest.mark.parametrize('views', [1, 2])
def test_ticks_from_one_shared_prefix_equal_sample_actions(dirs, segment, views):
    """N ticks served from one prefix in shared memory (zero-copy read, fixed noise) give
    sample_actions' chunks on the same inputs, within 1e-5 in fp32, for one and two
    cameras; the prefix's bytes in the ring are the same after 100 ticks."""
    world = load_world_expert(dirs[views], 'fp32')
    action = load_action_expert(dirs[views], 'fp32')
    assert world.spec.shape == action.spec.representation_shape
    obs = _observation(world)
    rep = world.encode(obs)
    writer = ShmRingWriter(segment, 4, world.spec.shape, world.version, world.spec.dtype)
    reader = ShmRingReader(segment, ttl_ms=60_000)
    try:
        writer.put('cd' * 16, time.time_ns(), rep)
        slot_bytes = lambda: hashlib.sha256(writer._l.data_view(0, rep.shape, 'float32')).digest()  # noqa: E731
        before = slot_bytes()
        ticker = ActionTicker(action, reader, world.version, 7, 0, math.inf, 0.02)
        reference = PI0ForConditionalGeneration.from_pretrained(dirs[views]).eval()
        inputs = world.inputs([obs])
        rng = np.random.default_rng(1)
        for i in range(4):
            q = HOME + rng.normal(0, 0.05, 7) * [1, 1, 1, 1, 1, 1, 0.1]
            ticker.set_joint_state(q)
            res = ticker.tick()
            assert res.kind == 'chunk', res.reason
            with torch.inference_mode():
                expected = reference.sample_actions(
                    state=action.model_state(torch.tensor(q[None], dtype=torch.float32)),
                    noise=action.noise,
                    **inputs,
                )
            expected = action.to_robot(expected)[0].numpy()
            assert res.positions.shape == (50, 7)
            assert np.max(np.abs(res.positions - expected)) <= 1e-5, i
        assert ticker.prepares == 1  # one prefix, prepared once, reused by every tick
        for _ in range(96):
            assert ticker.tick().kind == 'chunk'
        assert slot_bytes() == before  # 100 ticks: nothing was written into the prefix
    finally:
        reader.close()
        writer.close()


def test_a_new_subtask_is_a_new_observation_encoded_once(dirs):
    world = load_world_expert(dirs[2], 'fp32')
    enc = FrameEncoder(world, InProcessCache(8, 60_000, world.version))
    obs = _observation(world)

    def frames(o):
        return {v: ('rgb8', 128, 128, 384, o.views[v].tobytes()) for v in o.views}

    stamp = time.time_ns()
    for prompt in ('reach the red apple', 'reach the red apple', 'grasp the red apple'):
        begun = enc.begin_views(frames(obs), stamp, prompt)
        if not hasattr(begun, 'cache_hit'):
            rep = world.encode(begun.observation)
            enc.complete(begun, rep, 1.0)
    assert enc.frames == 3 and enc.hits == 1 and world.calls == 2
    assert enc.calls_per_frame() == 1.0
    # the prompt is in the representation: the two subtasks' prefixes differ
    a = world.encode(Observation(obs.views, prompt='reach the red apple'))
    b = world.encode(Observation(obs.views, prompt='grasp the red apple'))
    assert not np.array_equal(a, b)


def test_a_bf16_prefix_travels_as_its_words_and_decodes_close_to_fp32(dirs, segment):
    world16 = load_world_expert(dirs[2], 'bf16')
    world32 = load_world_expert(dirs[2], 'fp32')
    action = load_action_expert(dirs[2], 'fp32')
    assert world16.spec.dtype == 'bfloat16' and world16.spec.nbytes * 2 == world32.spec.nbytes
    obs = _observation(world16)
    rep16 = world16.encode(obs)
    assert rep16.dtype == np.uint16  # numpy has no bfloat16: its 16-bit words
    writer = ShmRingWriter(segment, 2, world16.spec.shape, world16.version, 'bfloat16')
    reader = ShmRingReader(segment, ttl_ms=60_000)
    try:
        entry = writer.put('ef' * 16, time.time_ns(), rep16)
        assert entry.dtype == 'bfloat16'
        ticker = ActionTicker(action, reader, world16.version, 7, 0, math.inf, 0.02)
        ticker.set_joint_state(HOME)
        res = ticker.tick()
        assert res.kind == 'chunk', res.reason
        ctx = action.prepare(torch.from_numpy(world32.encode(obs))[None])
        fp32 = action.decode(ctx, torch.tensor(HOME[None], dtype=torch.float32))[0].numpy()
        # the same model at two precisions: close, not equal (a bf16 prefix read as uint16
        # numbers would be thousands of radians off)
        assert np.max(np.abs(res.positions - fp32)) < 0.05
    finally:
        reader.close()
        writer.close()


def test_the_tiny_pair_passes_the_conformance_kit(dirs):
    checks = check.check_dirs(dirs[2], dirs[2], default_config())
    # the latency verdict is this machine's load at the time: its figures must be there
    assert all(c.passed for c in check.untimed(checks)), check.table(checks)
    assert check.timed_ran(checks), check.table(checks)
    by = {c.name: c for c in checks}
    assert '(5, 176, 64)' in by['contract'].figure and '50x7' in by['contract'].figure


def _copy_with(src, tmp_path, **serving):
    """The directory with its manifest's pi0 block changed (and resealed)."""
    dst = str(tmp_path / 'changed')
    shutil.copytree(src, dst)
    m = read_manifest(dst)
    extra = dict(m.extra)
    extra['pi0'] = {**extra['pi0'], **serving}
    os.unlink(os.path.join(dst, 'manifest.json'))
    write_manifest(dst, m.name, m.version, extra)
    return dst


@pytest.mark.parametrize(
    'change, reason',
    [
        (
            {'joints': ['arm_joint_1', 'arm_joint_2'], 'scale': [1, 1]},
            "robot joints ['arm_joint_3",
        ),
        (
            {'joints': ['shoulder'] + [f'arm_joint_{i}' for i in range(2, 7)] + ['gripper_joint']},
            "names ['shoulder']",
        ),
        ({'scale': [57.2958] * 7}, 'wrong unit (degrees?)'),
        ({'output': 'velocity'}, "pi0.output 'velocity'"),
        ({'views': []}, 'pi0.views must name at least one camera'),
    ],
)
def test_a_mapping_that_does_not_fit_the_robot_is_refused_with_the_reason(
    dirs, tmp_path, change, reason
):
    bad = _copy_with(dirs[2], tmp_path, **change)
    with pytest.raises(ModelLoadError) as exc:
        load_action_expert(bad, 'fp32', robot=TABLETOP_ARM)
    assert reason in str(exc.value) and 'changed' in str(exc.value)


def test_missing_statistics_are_refused_with_the_reason(dirs, tmp_path):
    bad = str(tmp_path / 'nostats')
    shutil.copytree(dirs[1], bad)
    path = os.path.join(bad, 'processor_config.json')
    with open(path) as fh:
        doc = json.load(fh)
    doc['actions_std'] = None
    with open(path, 'w') as fh:
        json.dump(doc, fh)
    m = read_manifest(bad)
    os.unlink(os.path.join(bad, 'manifest.json'))
    write_manifest(bad, m.name, m.version, m.extra)
    with pytest.raises(ModelLoadError, match='needs actions_std with at least 7 values'):
        load_action_expert(bad, 'fp32')


def test_a_tampered_checkpoint_is_refused_before_it_loads(dirs, tmp_path):
    bad = str(tmp_path / 'tampered')
    shutil.copytree(dirs[1], bad)
    with open(os.path.join(bad, 'model.safetensors'), 'r+b') as fh:
        fh.seek(-4, 2)
        fh.write(b'\0\0\0\1')
    with pytest.raises(ManifestError, match='fails its sha256 check'):
        load_world_expert(bad)


# ---------------------------------------------------------------- image processing
def _steps(**kw):
    base = dict(
        size=None,
        max_size=(112, 112),
        pad_size=(112, 112),
        resample='bicubic',
        rescale_factor=1 / 255,
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        tokens_per_image=64,
    )
    base.update(kw)
    return ImageProcessing(**base)


def test_image_resize_keeps_the_aspect_and_pads_bottom_right_with_zeros():
    assert fitted_size(100, 200, 50, 50) == (25, 50)  # transformers' documented examples
    assert fitted_size(100, 200, 200, 500) == (200, 400)
    frame = np.full((64, 128, 3), 255, np.uint8)  # white, twice as wide as high
    px = Pi0Images(_steps())([frame])
    assert px.shape == (1, 3, 112, 112)
    assert torch.allclose(px[0, :, :56], torch.ones(3, 56, 112))  # 255 -> 1.0
    assert torch.equal(px[0, :, 56:], torch.zeros(3, 56, 112))  # padding: 0 after normalising


def test_image_at_the_output_size_is_only_normalised():
    frame = np.random.default_rng(0).integers(0, 256, (112, 112, 3), dtype=np.uint8)
    px = Pi0Images(_steps())([frame])
    expected = torch.from_numpy(frame).permute(2, 0, 1).float() / 255 * 2 - 1
    assert torch.allclose(px[0], expected, atol=1e-6)


def test_image_resampling_lands_on_uint8_values():
    frame = np.random.default_rng(1).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    px = Pi0Images(_steps(max_size=None, size=(112, 112), pad_size=None))([frame])
    values = (px + 1) / 2 * 255  # back to the uint8 scale
    assert torch.allclose(values, values.round(), atol=1e-3)
    assert float(values.min()) >= 0 and float(values.max()) <= 255


def test_a_bad_frame_is_refused_with_the_reason():
    with pytest.raises(ValueError, match='HxWx3 uint8'):
        Pi0Images(_steps()).one(np.zeros((8, 8), np.uint8))


# ---------------------------------------------------------------- prompt layout
def test_the_prefix_is_images_then_bos_text_newline_padded(dirs):
    world = load_world_expert(dirs[2], 'fp32')
    p = world.prompt
    ids, mask = p(['reach the red apple', 'x' * 500])
    tok = p.tokenizer
    assert ids.shape == (2, 64 * 2 + 48) and mask.shape == ids.shape
    assert (ids[:, :128] == p.image_token_id).all() and (mask[:, :128] == 1).all()
    text = ids[0, 128:][mask[0, 128:].bool()]
    assert text[0] == tok.bos_token_id
    assert tok.decode(text[1:]) == 'reach the red apple\n'
    assert (ids[0, 128:][~mask[0, 128:].bool()] == tok.pad_token_id).all()
    assert mask[1].all()  # a long text is truncated to the prompt length, no padding
    # special tokens typed into a subtask are not tokens: no image feature is claimed
    ids2, _ = p(['<image><image> reach'])
    assert int((ids2 == p.image_token_id).sum()) == 128
