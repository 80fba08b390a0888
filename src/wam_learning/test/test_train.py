"""Behaviour cloning: the dataset round-trips, training lowers the loss, saved weights are
verified."""

import json
import os

import numpy as np
import pytest
import torch

from wam_core.common.paths import workspace_root
from wam_core.models.action_expert import load_action_expert
from wam_core.models.manifest import ManifestError, read_manifest
from wam_core.models.world_expert import WorldExpert
from wam_learning import dataset, train


@pytest.fixture(scope='module')
def tiny_dataset(tmp_path_factory):
    out = str(tmp_path_factory.mktemp('data'))
    dataset.record(out, episodes=2, first_seed=3, render_every=4, progress=False)
    return out


def test_dataset_records_successful_episodes_with_a_manifest(tiny_dataset):
    manifest, episodes = dataset.load(tiny_dataset)
    assert len(episodes) == len(manifest['episodes']) >= 1
    ep = episodes[0]
    ticks = len(ep['chunks'])
    assert ep['chunks'].shape == (ticks, 16, 7) and ep['joint_positions'].shape == (ticks, 7)
    assert ep['images'].shape[1:] == (128, 128, 3) and ep['images'].dtype == np.uint8
    # every view of the sim, one frame each per stamp, with the objects' pixels in the
    # moving wrist view (NaN while out of it, inside the image otherwise)
    assert manifest['views'] == ['front', 'wrist']
    assert ep['images_wrist'].shape == ep['images'].shape
    assert not np.array_equal(ep['images_wrist'], ep['images'])
    px = ep['pixels_wrist']
    assert px.shape == (len(ep['images']), 2, 2)
    seen = px[~np.isnan(px)]
    assert seen.size and np.all((seen >= 0) & (seen < 128))
    # the apple is in the wrist view when the gripper closes on it
    phase_of = [manifest['phases'][ep['phase'][t]] for t in ep['frame_tick']]
    close = [f for f, name in enumerate(phase_of) if name == 'close']
    assert close and not np.isnan(px[close, 0]).any()
    assert np.all(np.diff(ep['frame_tick']) == 4) and bool(ep['success'])
    # the expert's phases run in order from reaching to retreating
    names = [manifest['phases'][i] for i in ep['phase']]
    assert names[0] == 'reach' and names[-1] == 'retreat' and 'close' in names


def test_a_tampered_dataset_file_is_refused(tiny_dataset, tmp_path):
    import shutil

    copy = str(tmp_path / 'd')
    shutil.copytree(tiny_dataset, copy)
    m = json.load(open(os.path.join(copy, 'manifest.json')))
    with open(os.path.join(copy, m['episodes'][0]['file']), 'ab') as fh:
        fh.write(b'x')
    with pytest.raises(ValueError, match='sha256'):
        dataset.load(copy)


def test_a_short_training_run_lowers_both_losses_and_saves_verified_weights(
    tiny_dataset, tmp_path
):
    torch.set_num_threads(1)
    out = str(tmp_path / 'models')
    info = train.train(
        tiny_dataset,
        out,
        steps=40,
        batch=4,
        lr=1e-3,
        seed=0,
        progress=False,
        log_every=1,
        val_every=39,
        scenes=2,
        action_steps=120,
        action_batch=64,
    )
    rows = list(__import__('csv').DictReader(open(os.path.join(out, 'training', 'loss_log.csv'))))
    for stage, key in (('world', 'object_l1'), ('action', 'action_l1')):
        series = [float(r[key]) for r in rows if r['stage'] == stage]
        first, last = np.mean(series[:3]), np.mean(series[-3:])
        assert last < 0.7 * first, (stage, first, last)
    val = [float(r['val_action_l1']) for r in rows if r['val_action_l1']]
    assert len(val) >= 2 and val[-1] < val[0]
    assert os.path.getsize(os.path.join(out, 'training', 'loss.png')) > 5000
    # both experts carry manifests naming the same version and load through the check
    w, a = read_manifest(info['world_dir']), read_manifest(info['action_dir'])
    assert w.version == a.version == info['version'] and a.extra['world_version'] == w.version
    assert a.extra['trained'] is True
    # trained on every recorded view: the world expert needs both, the action expert reads both
    assert w.extra['views'] == ['front', 'wrist']
    world = WorldExpert(info['world_dir'], precision='fp32')
    assert world.spec.view_names == ('front', 'wrist')
    assert world.spec.shape[0] == 2 * 65
    load_action_expert(info['action_dir'])
    with open(os.path.join(info['action_dir'], 'model.safetensors'), 'r+b') as fh:
        fh.seek(-8, 2)
        fh.write(b'\x00' * 8)
    with pytest.raises(ManifestError):
        load_action_expert(info['action_dir'])


def test_training_is_deterministic_given_the_seed(tiny_dataset, tmp_path):
    torch.set_num_threads(1)
    outs = []
    for run in ('a', 'b'):
        info = train.train(
            tiny_dataset,
            str(tmp_path / run),
            steps=3,
            batch=2,
            seed=5,
            progress=False,
            log_every=1,
            val_every=100,
            scenes=2,
            action_steps=3,
            action_batch=16,
        )
        outs.append(
            (
                read_manifest(info['world_dir']).files['model.safetensors'],
                read_manifest(info['action_dir']).files['model.safetensors'],
            )
        )
    assert outs[0] == outs[1]


def test_action_ticks_pair_each_state_with_the_estimate_of_an_earlier_frame(tiny_dataset):
    """Stage 2's inputs: the world expert's estimate comes from the tick's latest frame (or
    one up to STATE_LAG_TICKS older), never from a later one."""
    manifest, episodes = dataset.load(tiny_dataset)
    vec = {t: np.full(384, i, np.float32) for i, t in enumerate(train.plan_texts().values())}
    b = train.Batches(
        episodes, manifest['phase_skill'], manifest['phases'], train.plan_texts(), vec, seed=0
    )
    # a fake estimate that names its own frame: frame index in every column
    predicted = np.repeat(np.arange(len(b), dtype=np.float32)[:, None], 5, axis=1)
    q, true, est, chunk, sub = b.ticks(200, predicted)
    assert (
        q.shape == (200, 7) and chunk.shape == (200, 16, 7) and true.shape == est.shape == (200, 5)
    )
    for qi, f in zip(q.numpy(), est[:, 0].numpy().astype(int), strict=True):
        ei = int(b.frame_ep[f])
        ep, tick = episodes[ei], int(b.frame_tick[f])
        # the state is one of the ticks this frame serves: at or after it, within the lag
        served = ep['joint_positions'][tick : tick + 4 + train.STATE_LAG_TICKS]
        assert np.any(np.all(np.isclose(served, qi), axis=1))
    # without an estimate the inputs are the true positions
    _, true, est, _, _ = b.ticks(50)
    assert torch.equal(true, est)


def _red_near(img: np.ndarray, k: int) -> bool:
    """Red pixels in patch k of a 128 px image (8x8 patches of 16) or its border."""
    r, c = divmod(k, 8)
    around = img[max(0, r * 16 - 4) : (r + 1) * 16 + 4, max(0, c * 16 - 4) : (c + 1) * 16 + 4]
    return ((around[..., 0] > 150) & (around[..., 1] < 80) & (around[..., 2] < 80)).sum() > 3


def test_patch_targets_point_at_the_red_apple_and_a_perfect_prediction_has_no_pixel_error():
    scenes = train.RandomScenes(seed=5)
    images, aux = scenes.sample(4)[:2]
    assert images.shape == (4, 1, 128, 128, 3)
    index, offset = train.patch_targets(aux, 128, 16)
    assert index.shape == (4, 1, 2) and offset.shape == (4, 1, 2, 2)
    index, offset = index[:, 0], offset[:, 0]
    for img, k in zip(images[:, 0].numpy().astype(int), index[:, 0].tolist(), strict=True):
        # the apple's centre patch holds red pixels (the cube spans ~5 px; allow the neighbours)
        assert _red_near(img, k)
    perfect = torch.full((4, 64, 6), -10.0)
    b = torch.arange(4)
    perfect[b, index[:, 0], 0] = 10.0
    perfect[b, index[:, 1], 1] = 10.0
    perfect[b, index[:, 0], 2:4] = offset[:, 0]
    perfect[b, index[:, 1], 4:6] = offset[:, 1]
    assert train.apple_pixel_error(perfect, index, offset, 16) < 1e-4
    assert float(train.patch_loss(perfect[:, None], index[:, None], offset[:, None])) < 1e-3
    wrong = perfect.roll(1, dims=1)
    assert train.apple_pixel_error(wrong, index, offset, 16) > 8.0


def test_wrist_view_patch_targets_follow_the_moving_camera_and_skip_what_it_cannot_see():
    scenes = train.RandomScenes(seed=7, views=('front', 'wrist'))
    images, aux, *_, px = scenes.sample(12)
    assert images.shape == (12, 2, 128, 128, 3) and px.shape == (12, 1, 2, 2)
    index, offset = train.patch_targets(aux, 128, 16, px)
    assert index.shape == (12, 2, 2)
    seen = index[:, 1, 0] != train.NO_PATCH  # the apple in the wrist view
    # half the poses put the gripper around the apple: some see it, the home-like ones not
    assert 0 < int(seen.sum()) < 12
    for i in np.flatnonzero(seen.numpy()):
        assert _red_near(images[i, 1].numpy().astype(int), int(index[i, 1, 0]))
    # centres out of a view add nothing to the loss, and an all-unseen view is no NaN
    patches = torch.randn(12, 2, 64, 6)
    unseen = index.clone()
    unseen[:, 1] = train.NO_PATCH
    only_front = train.patch_loss(patches[:, :1], index[:, :1], offset[:, :1])
    assert torch.isclose(train.patch_loss(patches, unseen, offset), only_front)
    assert torch.isfinite(train.patch_loss(patches, index, offset))


def test_several_datasets_load_together_and_later_ones_count_twice(tiny_dataset):
    manifest, episodes = train.load_datasets(f'{tiny_dataset},{tiny_dataset}')
    n = len(dataset.load(tiny_dataset)[1])
    assert len(episodes) == 3 * n and len(manifest['episodes']) == 2 * n


def test_dagger_rolls_out_the_policy_and_records_the_experts_labels(tmp_path):
    from wam_learning import dagger
    from wam_learning.evaluate import Policy

    root = workspace_root()
    policy = Policy(
        os.path.join(root, 'models', 'world_expert'),
        os.path.join(root, 'models', 'action_expert'),
        precision='fp32',
    )
    seed = dagger.DAGGER_FIRST_SEED
    dataset.record(
        str(tmp_path / 'p'),
        1,
        seed,
        noise=0.0,
        keep_failed=True,
        progress=False,
        driver_factory=lambda s: dagger.PolicyDriver(policy, s, beta=0.0),
    )
    dataset.record(str(tmp_path / 'e'), 1, seed, noise=0.0, keep_failed=True, progress=False)
    (_, [on_policy]), (_, [expert]) = (
        dataset.load(str(tmp_path / 'p')),
        dataset.load(str(tmp_path / 'e')),
    )
    n = min(len(on_policy['joint_positions']), len(expert['joint_positions']))
    assert on_policy['chunks'].shape[1:] == (16, 7) and len(on_policy['phase']) == len(
        on_policy['chunks']
    )
    # the same scene and start, but the policy drove: the visited states are its own
    assert np.abs(on_policy['joint_positions'][:n] - expert['joint_positions'][:n]).max() > 0.01


def test_random_scenes_carry_expert_chunks_for_the_approach_and_grasp():
    """The action labels on random scenes: the expert's chunk from the rendered state; the
    odd scenes put the TCP around and above the apple (the approach and the grasp), where
    an unseen apple is hardest to reach."""
    from wam_sim.tabletop import TcpKinematics

    scenes = train.RandomScenes(seed=7)
    images, aux, q, chunks, phases, _ = scenes.sample(8)
    assert images.shape[0] == aux.shape[0] == q.shape[0] == chunks.shape[0] == len(phases) == 8
    tcp_at = TcpKinematics()
    for i in range(8):
        tcp = tcp_at(q[i].numpy())
        apple = aux[i, :3].numpy() + [0, 0, train.TABLE_Z]
        assert np.allclose(chunks[i, 0], q[i], atol=0.15)  # a chunk starts where the arm is
        if i % 2:
            assert np.linalg.norm(tcp[:2] - apple[:2]) < 0.27 and tcp[2] < apple[2] + 0.32
            assert dataset.PHASES[phases[i]] in ('reach', 'descend', 'close')
        if dataset.PHASES[phases[i]] in ('reach', 'descend'):
            assert chunks[i, -1, 6] >= q[i, 6] - 1e-6  # opening, never closing


def test_phase_errors_are_zero_for_the_expert_and_grow_with_a_joint_offset(tiny_dataset):
    from wam_learning.diagnose import phase_errors

    manifest, episodes = dataset.load(tiny_dataset)

    def run(offset):
        # phase_errors visits every third frame in order: hand it each one's recorded label
        labels = iter([ep['chunks'][int(t)] for ep in episodes for t in ep['frame_tick'][::3]])
        return phase_errors(
            lambda image, q, phase: next(labels) + offset, episodes, manifest['phases']
        )

    exact = run(0.0)
    assert {'reach', 'close', 'retreat'} <= set(exact)
    assert all(r['tcp_cm_mean'] < 1e-6 and r['gripper_mm_mean'] < 1e-6 for r in exact.values())
    shifted = run(np.array([0.1, 0, 0, 0, 0, 0, 0.005]))  # 0.1 rad at the base: ~5 cm at the TCP
    assert all(
        2.0 < r['tcp_cm_mean'] < 10.0 and abs(r['gripper_mm_mean'] - 5.0) < 1e-3
        for r in shifted.values()
    )


def test_object_errors_are_zero_for_the_truth_and_measure_an_offset(tiny_dataset):
    from wam_learning.diagnose import object_errors

    manifest, episodes = dataset.load(tiny_dataset)

    def run(offset):
        truth = iter(
            [
                np.concatenate([ep['apple'][int(t)], ep['fridge']])
                for ep in episodes
                for t in ep['frame_tick'][::3]
            ]
        )
        return object_errors(lambda image: next(truth) + offset, episodes, manifest['phases'])

    assert all(r['apple_cm_mean'] < 1e-4 and r['fridge_cm_mean'] < 1e-4 for r in run(0.0).values())
    shifted = run(np.array([0.03, 0.04, 0.0, 0.0, 0.02]))
    assert all(
        abs(r['apple_cm_mean'] - 5.0) < 1e-3 and abs(r['fridge_cm_mean'] - 2.0) < 1e-3
        for r in shifted.values()
    )


def test_npz_with_objects_is_refused_by_the_dataset_loader(tmp_path):
    """A dataset file that smuggles Python objects does not load (allow_pickle=False)."""
    from wam_core.models.manifest import sha256_file

    f = tmp_path / 'episode_00000.npz'
    np.savez(f, images=np.array([{'a': 1}], dtype=object))
    (tmp_path / 'manifest.json').write_text(
        json.dumps({'episodes': [{'file': f.name, 'sha256': sha256_file(str(f))}]})
    )
    with pytest.raises(ValueError, match='pickle'):
        dataset.load(str(tmp_path))


def test_a_one_view_action_expert_widens_to_two_views_keeping_its_front_weights():
    from wam_core.models.action_expert import ActionExpert, ActionExpertConfig

    one = ActionExpert(ActionExpertConfig(repr_dim=32, repr_tokens=5, views=1))
    two = train.widen_views(one, 2)
    assert two.config.views == 2 and one.config.views == 1
    assert two.representation_shape == (10, 32)
    w1, w2 = one.object_head[1].weight, two.object_head[1].weight
    assert w2.shape == (32, 64)
    assert torch.equal(w2[:, :32], w1) and not w2[:, 32:].any()
    # the policy is kept as it is
    assert torch.equal(one.mlp[0].weight, two.mlp[0].weight)
    out = two.objects(torch.randn(3, 10, 32))
    assert out.shape == (3, 5) and torch.isfinite(out).all()
