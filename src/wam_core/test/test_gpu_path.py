"""The GPU path's parts a CPU can run: configuration errors, device refusals, the device-side
preprocessing, representations as tensors through the ticker, the realistic model size.
The captures and uploads themselves need a CUDA device (``test_..._on_the_device`` skip)."""

import os
import time

import numpy as np
import pytest
import torch

from wam_core.cache.cuda_ipc import CudaIpcRingReader, CudaIpcRingWriter
from wam_core.cache.shm import shm_path
from wam_core.common.config import ActionExpertParams, WorldExpertParams, check_device
from wam_core.common.params import ConfigError
from wam_core.models.contract import ContractError, Observation
from wam_core.models.cuda_graphs import GraphedCall, device_unavailable
from wam_core.models.default_models import write_default_models
from wam_core.models.preprocess import Preprocessor
from wam_core.models.registry import ModelLoadError, enable_cuda_graphs, load_world_expert
from wam_core.models.world_expert import WorldExpert, realistic_world_config, representation_tokens

NO_CUDA = device_unavailable('cuda')


@pytest.fixture(scope='module')
def models(tmp_path_factory):
    return write_default_models(str(tmp_path_factory.mktemp('models')), seed=3)


def test_device_settings_are_checked_with_the_reason():
    check_device('cpu', False)
    check_device('cuda:1', True)
    with pytest.raises(ConfigError, match='cpu, cuda or cuda:N'):
        check_device('gpu0', False)
    with pytest.raises(ConfigError, match='cuda_graphs needs a CUDA device'):
        check_device('cpu', True)
    with pytest.raises(ConfigError, match='cuda_graphs'):
        WorldExpertParams(cuda_graphs=True).validate()
    with pytest.raises(ConfigError, match='device'):
        ActionExpertParams(device='tpu').validate()


@pytest.mark.skipif(not NO_CUDA, reason='this machine has a CUDA device')
def test_without_a_gpu_the_experts_refuse_cuda_with_the_reason(models):
    from wam_core.models.action_expert import ObjectMlpExpert

    assert 'no CUDA device' in NO_CUDA
    with pytest.raises(ContractError, match='no CUDA device'):
        WorldExpert(models['world_dir'], device='cuda')
    with pytest.raises(ContractError, match='no CUDA device'):
        ObjectMlpExpert(models['action_dir'], device='cuda')
    with pytest.raises(ModelLoadError, match='no CUDA device'):  # as the node loads it
        load_world_expert(models['world_dir'], 'fp32', device='cuda')
    with pytest.raises(ValueError, match='CUDA tensors'):
        GraphedCall(lambda x: x * 2, [torch.zeros(3)])
    world = WorldExpert(models['world_dir'], precision='fp32')
    with pytest.raises(ModelLoadError, match='CUDA graph capture failed.*CUDA device'):
        enable_cuda_graphs(world, (1,))


def test_frames_normalised_on_the_device_match_the_host_path():
    pre = Preprocessor(128)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 255, size=(3, 96, 96, 3), dtype=np.uint8)  # resized to 128
    host = torch.cat([pre(f) for f in frames])
    device_side = pre.on_device(torch.from_numpy(frames))  # on the CPU here: same code
    assert device_side.shape == (3, 3, 128, 128)
    assert torch.allclose(host, device_side, atol=1e-5)


def test_representations_can_stay_tensors_and_the_ticker_serves_them(models, tmp_path):
    """cuda_ipc hands the ticker a tensor, not a numpy view: the same chunk comes out."""
    from test_cuda_ipc import HostMemory  # the host stand-in for device memory

    from wam_core.models.action_expert import ObjectMlpExpert
    from wam_core.serving.action_ticker import ActionTicker, Descriptor

    world = WorldExpert(models['world_dir'], precision='fp32')
    frame = np.random.default_rng(1).integers(0, 255, size=(128, 128, 3), dtype=np.uint8)
    obs = Observation({'front': frame})
    as_array = world.encode_batch([obs])[0]
    as_tensor = world.encode_batch([obs], on_device=True)[0]
    assert isinstance(as_tensor, torch.Tensor) and np.allclose(as_array, as_tensor.numpy())
    name = f'wam_test_ticker_{tmp_path.name[-8:]}'
    writer = CudaIpcRingWriter(name, 4, world.shape, world.version, memory=HostMemory)
    try:
        reader = CudaIpcRingReader(name, ttl_ms=1e9, memory=HostMemory)
        expert = ObjectMlpExpert(models['action_dir'])
        ticker = ActionTicker(expert, reader, world.version, 7, 384, timeout_ms=1e6)
        ticker.set_joint_state(np.zeros(7))
        e = writer.put('ab' * 16, time.time_ns(), as_tensor)
        ticker.set_descriptor(Descriptor(e.key, world.version, e.slot, e.epoch))
        res = ticker.tick()
        assert res.kind == 'chunk', res.reason
        with torch.inference_mode():
            rep = torch.from_numpy(as_array).unsqueeze(0)
            direct = expert.decode(expert.prepare(rep), torch.zeros(1, 7), torch.zeros(1, 384))
        assert np.allclose(res.positions, direct[0].numpy(), atol=1e-6)
        reader.close()
    finally:
        writer.close()
        for n in HostMemory.allocated:
            if os.path.exists(shm_path(n)):
                os.unlink(shm_path(n))


def test_the_realistic_world_expert_is_vit_b16_at_224_px():
    cfg = realistic_world_config()
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.image_size, cfg.patch_size) == (
        768,
        12,
        224,
        16,
    )
    assert representation_tokens(cfg) == 197
    with pytest.raises(ValueError, match='world size'):
        write_default_models('/nonexistent', world_size='huge')


@pytest.mark.skipif(bool(NO_CUDA), reason='no CUDA device')
def test_on_the_device_graphs_give_the_eager_representation_and_chunk(models):
    """Not run on this machine: bf16 experts on CUDA, graphs against eager."""
    from wam_core.models.action_expert import ObjectMlpExpert

    world = WorldExpert(models['world_dir'], precision='bf16', device='cuda')
    frame = np.random.default_rng(2).integers(0, 255, size=(128, 128, 3), dtype=np.uint8)
    obs = [Observation({'front': frame})] * 2
    eager = world.encode_batch(obs)
    world.enable_cuda_graphs((1, 2))
    graphed = world.encode_batch(obs)
    assert all(np.allclose(a, b, atol=1e-2) for a, b in zip(eager, graphed, strict=True))
    expert = ObjectMlpExpert(models['action_dir'], device='cuda')
    rep = torch.as_tensor(eager[0], device='cuda').unsqueeze(0)
    js, st = torch.zeros(1, 7, device='cuda'), torch.zeros(1, 384, device='cuda')
    with torch.inference_mode():
        a = expert.decode(expert.prepare(rep), js, st).cpu()
        expert.enable_cuda_graphs()
        b = expert.decode(expert.prepare(rep), js, st).cpu()
    assert torch.allclose(a, b, atol=1e-5)
