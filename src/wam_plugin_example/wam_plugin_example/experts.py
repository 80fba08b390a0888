"""Two experts that are not the stack's own, served through the expert contract.

- ``example_pooled_cnn`` (world): two strided convolutions and a 4x4 average pool over
  a 96 px frame: 16 region tokens plus their mean, 32 wide ([17, 32] per view);
- ``example_linear_delta`` (action): ``prepare`` keeps the mean token; ``decode`` is one
  linear map of (context, joint state, conditioning) to a 10-step chunk of bounded
  *deltas* on the current joint positions (the stack adds them).

Different shapes, horizon and output kind from the default pair on purpose: the tests
serve this pair with the unchanged nodes. The weights are seeded, not trained, so the
robot only twitches in place (deltas within 1 cm or 0.01 rad). Write a pair with

    python -m wam_plugin_example.experts --out /tmp/example_models

and serve it with ``world_expert.model_dir`` / ``action_expert.model_dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from wam_core.common.robot import TABLETOP_ARM
from wam_core.models.contract import (
    ActionExpertSpec,
    ContractError,
    Observation,
    ViewSpec,
    WorldExpertSpec,
)
from wam_core.models.manifest import verify_manifest, write_manifest
from wam_core.models.precision import float_dtype, resolve_precision

WEIGHTS, CONFIG = 'model.safetensors', 'config.json'


def _config(model_dir: str) -> dict:
    with open(os.path.join(model_dir, CONFIG), encoding='utf-8') as fh:
        return json.load(fh)


class _PooledCnn(nn.Module):
    def __init__(self, width: int, grid: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 5, stride=4, padding=2)
        self.conv2 = nn.Conv2d(16, width, 3, stride=2, padding=1)
        self.grid = grid

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 3, S, S] -> [B, 1 + g*g, W]
        x = F.gelu(self.conv2(F.gelu(self.conv1(x))))
        regions = F.adaptive_avg_pool2d(x, self.grid).flatten(2).transpose(1, 2)
        return torch.cat([regions.mean(1, keepdim=True), regions], dim=1)


class PooledCnnWorld:
    """The world expert: one view, ``spec.shape`` = [17, 32] float32."""

    def __init__(self, model_dir: str, precision: str = 'fp32', device: str = 'cpu', robot=None):
        self.manifest = verify_manifest(model_dir)
        self.name, self.version = self.manifest.name, self.manifest.version
        cfg = _config(model_dir)
        self.size, width, grid = int(cfg['image_size']), int(cfg['width']), int(cfg['grid'])
        self.dtype = float_dtype(resolve_precision(precision, device))
        self.device = torch.device(device)
        self.net = _PooledCnn(width, grid)
        self.net.load_state_dict(load_file(os.path.join(model_dir, WEIGHTS)))
        self.net.eval().to(self.device, self.dtype)
        self.spec = WorldExpertSpec(
            views=(ViewSpec('front', self.size, self.size),), view_shape=(1 + grid * grid, width)
        )
        self.calls = 0
        self.forwards = 0

    def _pixels(self, frame: np.ndarray) -> torch.Tensor:
        x = torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1)[None].float() / 255.0
        if x.shape[-2:] != (self.size, self.size):
            x = F.interpolate(x, size=(self.size, self.size), mode='bilinear', antialias=True)
        return (x - 0.5).to(self.device, self.dtype)

    @torch.inference_mode()
    def encode_batch(self, observations) -> list[np.ndarray]:
        try:
            frames = [o.views['front'] for o in observations]
        except KeyError:
            raise ValueError('the observation has no front view') from None
        out = self.net(torch.cat([self._pixels(f) for f in frames])).float().cpu().numpy()
        self.calls += len(observations)
        self.forwards += 1
        return list(out)

    def encode(self, observation: Observation) -> np.ndarray:
        return self.encode_batch([observation])[0]

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        frame = np.zeros((self.size, self.size, 3), dtype=np.uint8)
        obs = Observation({'front': frame})
        calls, forwards = self.calls, self.forwards
        t0 = time.perf_counter()
        for _ in range(max(n, 1)):
            self.encode(obs)
        mean = (time.perf_counter() - t0) / max(n, 1)
        for size in batch_sizes:
            if size > 1:
                self.encode_batch([obs] * size)
        self.calls, self.forwards = calls, forwards
        return mean


class LinearDeltaAction:
    """The action expert: ``output='delta'``, a 10-point horizon."""

    def __init__(self, model_dir: str, precision: str = 'fp32', device: str = 'cpu', robot=None):
        self.manifest = verify_manifest(model_dir)
        self.name, self.version = self.manifest.name, self.manifest.version
        cfg, extra = _config(model_dir), self.manifest.extra
        joints = tuple(extra.get('joint_names') or ())
        if not joints:
            raise ContractError(f'{model_dir!r}: manifest extra.joint_names is empty')
        self.horizon, self.max_delta = int(cfg['horizon']), float(cfg['max_delta'])
        width, tokens, cond = int(cfg['repr_width']), int(cfg['repr_tokens']), int(cfg['cond'])
        self.dtype = float_dtype(resolve_precision(precision, device))
        self.device = torch.device(device)
        self.net = nn.Linear(width + len(joints) + cond, self.horizon * len(joints))
        self.net.load_state_dict(load_file(os.path.join(model_dir, WEIGHTS)))
        self.net.eval().to(self.device, self.dtype)
        self.spec = ActionExpertSpec(
            joint_names=joints,
            horizon=self.horizon,
            period_s=float(extra['period_s']),
            representation_shape=(tokens, width),
            conditioning_dim=cond,
            world_version=str(extra.get('world_version', '')),
            output='delta',
        )

    def prepare(self, representation: torch.Tensor) -> torch.Tensor:
        return representation.mean(dim=1)  # [1, W]: the context is one vector

    def decode(self, context, joint_state, conditioning) -> torch.Tensor:
        x = torch.cat([context, joint_state, conditioning], dim=1)
        out = torch.tanh(self.net(x)) * self.max_delta
        return out.view(-1, self.horizon, joint_state.shape[1])


def write_example_models(out: str, seed: int = 0) -> dict:
    """A seeded pair under ``out``/example_world and ``out``/example_action."""
    world_dir, action_dir = os.path.join(out, 'example_world'), os.path.join(out, 'example_action')
    version = f'example-seed{seed}'
    torch.manual_seed(seed)
    cfg_w = {'image_size': 96, 'width': 32, 'grid': 4}
    cfg_a = {'horizon': 10, 'max_delta': 0.01, 'repr_width': 32, 'repr_tokens': 17, 'cond': 384}
    joints = list(TABLETOP_ARM.joint_names)
    nets = {
        world_dir: (_PooledCnn(cfg_w['width'], cfg_w['grid']), cfg_w),
        action_dir: (nn.Linear(32 + len(joints) + 384, cfg_a['horizon'] * len(joints)), cfg_a),
    }
    for d, (net, cfg) in nets.items():
        os.makedirs(d, exist_ok=True)
        save_file(
            {k: v.contiguous() for k, v in net.state_dict().items()}, os.path.join(d, WEIGHTS)
        )
        with open(os.path.join(d, CONFIG), 'w', encoding='utf-8') as fh:
            json.dump(cfg, fh, indent=2)
    write_manifest(world_dir, 'example-pooled-cnn', version, {'type': 'example_pooled_cnn'})
    write_manifest(
        action_dir,
        'example-linear-delta',
        version,
        {
            'type': 'example_linear_delta',
            'world_version': version,
            'joint_names': joints,
            'period_s': 0.02,
        },
    )
    return {'world_dir': world_dir, 'action_dir': action_dir, 'version': version}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--out', required=True)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args(argv)
    info = write_example_models(args.out, args.seed)
    print(f'example models written: {info["world_dir"]}, {info["action_dir"]}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
