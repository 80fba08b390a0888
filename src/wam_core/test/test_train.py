"""Behaviour cloning: the dataset round-trips, training lowers the loss, saved weights are verified."""
import json
import os

import numpy as np
import pytest
import torch

from wam_core import dataset, train
from wam_core.action_expert import load_action_expert
from wam_core.manifest import ManifestError, read_manifest
from wam_core.world_expert import WorldExpert


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


def test_a_short_training_run_lowers_the_loss_and_saves_verified_weights(tiny_dataset, tmp_path):
    torch.set_num_threads(1)
    out = str(tmp_path / 'models')
    info = train.train(tiny_dataset, out, steps=40, batch=4, per_frame=2, lr=1e-3, seed=0, progress=False,
                       log_every=1, val_every=39, scenes=2)
    rows = list(__import__('csv').DictReader(open(os.path.join(out, 'training', 'loss_log.csv'))))
    first = np.mean([float(r['action_l1']) for r in rows[:3]])
    last = np.mean([float(r['action_l1']) for r in rows[-3:]])
    assert last < 0.7 * first, (first, last)
    val = [float(r['val_action_l1']) for r in rows if r['val_action_l1']]
    assert val[-1] < val[0]
    assert os.path.getsize(os.path.join(out, 'training', 'loss.png')) > 5000
    # both experts carry manifests naming the same version and load through the check
    w, a = read_manifest(info['world_dir']), read_manifest(info['action_dir'])
    assert w.version == a.version == info['version'] and a.extra['world_version'] == w.version
    assert a.extra['trained'] is True
    WorldExpert(info['world_dir'], precision='fp32')
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
        info = train.train(tiny_dataset, str(tmp_path / run), steps=3, batch=2, per_frame=2, seed=5,
                           progress=False, log_every=1, val_every=100, scenes=2)
        outs.append(read_manifest(info['action_dir']).files['model.safetensors'])
    assert outs[0] == outs[1]
