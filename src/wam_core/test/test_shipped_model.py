"""The trained weights shipped in models/ load through the manifest check and reproduce
the outputs recorded at training time on a stored sample."""

import os

import numpy as np
import pytest
import torch

from wam_core.common.paths import workspace_root
from wam_core.models.action_expert import load_action_expert
from wam_core.models.contract import Observation
from wam_core.models.manifest import read_manifest
from wam_core.models.world_expert import WorldExpert

ROOT = workspace_root()
MODELS = os.path.join(ROOT, 'models')
SAMPLE = os.path.join(MODELS, 'training', 'reference_sample.npz')


def _chunk(action, representation, sample) -> np.ndarray:
    """The action expert's chunk for a representation and the sample's joints and subtask."""
    with torch.inference_mode():
        return action(
            torch.from_numpy(representation)[None],
            torch.from_numpy(sample['joint_positions'])[None],
            torch.from_numpy(sample['subtask'])[None],
        )[0].numpy()


def test_shipped_models_are_trained_and_paired():
    w = read_manifest(os.path.join(MODELS, 'world_expert'))
    a = read_manifest(os.path.join(MODELS, 'action_expert'))
    assert a.extra.get('trained') is True and w.extra.get('trained') is True
    assert a.extra['world_version'] == w.version == a.version
    size = sum(
        os.path.getsize(os.path.join(MODELS, d, f))
        for d in ('world_expert', 'action_expert')
        for f in os.listdir(os.path.join(MODELS, d))
    )
    assert size < 20e6, size


def test_shipped_models_reproduce_the_recorded_outputs():
    if not os.path.exists(SAMPLE):
        pytest.fail(
            f'{SAMPLE} is missing: the shipped models must come with their reference sample'
        )
    s = np.load(SAMPLE, allow_pickle=False)
    world = WorldExpert(os.path.join(MODELS, 'world_expert'), precision='fp32')
    action, _ = load_action_expert(os.path.join(MODELS, 'action_expert'), precision='fp32')
    # the stored observation: 'image' is the front view, 'image_<view>' each other view
    views = world.spec.view_names
    frames = {v: s['image'] if i == 0 else s[f'image_{v}'] for i, v in enumerate(views)}
    rep = world.encode(Observation(frames))
    assert np.allclose(rep, s['representation'], atol=1e-4)
    chunk = _chunk(action, rep, s)
    assert np.allclose(chunk, s['chunk'], atol=1e-4)
    # and the chunk is sane: it moves the arm, within the model's per-joint bound
    delta = np.abs(chunk - s['joint_positions'])
    assert np.max(delta) > 1e-3
    assert np.all(delta <= np.array(action.config.delta_scale) + 1e-6)


def test_the_int8_world_expert_stays_close_to_fp32_on_the_stored_sample():
    """precision int8 (dynamic quantization of the Linear layers): every Linear is
    swapped, the representation moves ~2 % and the action chunk it yields well under a
    milliradian (measured 1.8 % and 0.37 mrad), so the shipped pair keeps its behaviour."""
    from wam_core.models.precision import resolve_precision

    s = np.load(SAMPLE, allow_pickle=False)
    world = WorldExpert(os.path.join(MODELS, 'world_expert'), precision='int8')
    quantized = torch.ao.nn.quantized.dynamic.Linear
    linears = [m for m in world.model.modules() if isinstance(m, torch.nn.Linear | quantized)]
    assert linears and all(isinstance(m, quantized) for m in linears), linears
    action, _ = load_action_expert(os.path.join(MODELS, 'action_expert'), precision='fp32')
    views = world.spec.view_names
    frames = {v: s['image'] if i == 0 else s[f'image_{v}'] for i, v in enumerate(views)}
    rep = world.encode(Observation(frames))
    assert rep.dtype == np.float32 and rep.shape == s['representation'].shape
    ref = s['representation']
    rel = np.linalg.norm(rep - ref) / np.linalg.norm(ref)
    assert 0 < rel < 0.05, rel  # quantized (not the fp32 model), and close to it
    assert np.max(np.abs(_chunk(action, rep, s) - s['chunk'])) < 5e-3
    with pytest.raises(ValueError, match='CPU only'):
        resolve_precision('int8', 'cuda')
