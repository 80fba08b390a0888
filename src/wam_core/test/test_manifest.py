import json
import os
import shutil

import pytest

from wam_core.models.action_expert import load_action_expert
from wam_core.models.manifest import ManifestError, read_manifest, verify_manifest
from wam_core.models.world_expert import WorldExpert


def _copy(src, tmp_path, name):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return str(dst)


def test_default_models_verify_and_load(models):
    m = verify_manifest(models['world_dir'])
    assert m.version == models['version'] and 'model.safetensors' in m.files
    world = WorldExpert(models['world_dir'], 'fp32')
    assert world.shape == (65, 192)
    action, am = load_action_expert(models['action_dir'])
    assert am.extra['world_version'] == m.version
    assert action.config.chunk_size == 16


def test_tampered_weight_file_is_refused(models, tmp_path):
    d = _copy(models['world_dir'], tmp_path, 'w')
    path = os.path.join(d, 'model.safetensors')
    with open(path, 'r+b') as fh:
        fh.seek(os.path.getsize(path) // 2)
        b = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(ManifestError, match='sha256'):
        WorldExpert(d, 'fp32')


def test_missing_file_is_refused(models, tmp_path):
    d = _copy(models['action_dir'], tmp_path, 'a')
    os.remove(os.path.join(d, 'config.json'))
    with pytest.raises(ManifestError, match='missing'):
        load_action_expert(d)


def test_missing_or_malformed_manifest_is_refused(models, tmp_path):
    d = _copy(models['action_dir'], tmp_path, 'a')
    os.remove(os.path.join(d, 'manifest.json'))
    with pytest.raises(ManifestError, match='no manifest.json'):
        verify_manifest(d)
    with open(os.path.join(d, 'manifest.json'), 'w') as fh:
        fh.write('{not json')
    with pytest.raises(ManifestError, match='unreadable'):
        verify_manifest(d)


def test_manifest_entry_cannot_escape_the_directory(models, tmp_path):
    d = _copy(models['action_dir'], tmp_path, 'a')
    doc = json.load(open(os.path.join(d, 'manifest.json')))
    doc['files']['../../etc/passwd'] = '0' * 64
    json.dump(doc, open(os.path.join(d, 'manifest.json'), 'w'))
    with pytest.raises(ManifestError, match='outside'):
        verify_manifest(d)
    assert read_manifest(models['action_dir']).name == 'wam-action-object-mlp'
