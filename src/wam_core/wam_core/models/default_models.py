"""Write deterministic, seeded default model directories (no download needed).

    python -m wam_core.models.default_models --out models [--seed 0] [--views front,wrist]
                                             [--world-size tiny|base] [--description URDF]

Each directory gets config.json, model.safetensors and manifest.json (sha256 of
each file, name, version). The action expert's manifest names the world-expert
version it pairs with; readers refuse representations of any other version.
A later training step overwrites these with trained weights. ``--world-size base`` writes
a ViT-B/16 world expert at 224 px (seeded, untrained: for latency figures, ``bench/gpu.py``).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
from transformers import ViTModel

from ..common.robot import TABLETOP_ARM, RobotDescription, description_of_file
from .action_expert import ActionExpert, ActionExpertConfig, arm_chain, default_delta_scale
from .manifest import write_manifest
from .world_expert import WORLD_SIZES, representation_tokens

WORLD_NAME = 'wam-world-vit-tiny'
ACTION_NAME = 'wam-action-object-mlp'
WORLD_TYPE, ACTION_TYPE = 'vit', 'object_mlp'  # their registry types (models.registry)
PERIOD_S = 0.02  # the control period the demonstrations are recorded at


def write_default_models(
    out: str,
    seed: int = 0,
    joints: int | None = None,
    views: tuple[str, ...] = ('front',),
    world_size: str = 'tiny',
    robot: RobotDescription = TABLETOP_ARM,
) -> dict:
    """A seeded pair for ``robot`` (its joints, kinematic chain and TCP; the first
    ``joints`` of them)."""
    joints = len(robot.joint_names) if joints is None else joints
    if world_size not in WORLD_SIZES:
        raise ValueError(f'world size {world_size!r}: one of {", ".join(WORLD_SIZES)}')
    version = f'default-seed{seed}' + ('' if views == ('front',) else '-' + '-'.join(views))
    version += '' if world_size == 'tiny' else f'-{world_size}'
    world_dir, action_dir = os.path.join(out, 'world_expert'), os.path.join(out, 'action_expert')
    torch.manual_seed(seed)
    world = ViTModel(WORLD_SIZES[world_size](), add_pooling_layer=False)
    world.save_pretrained(world_dir)
    write_manifest(
        world_dir,
        WORLD_NAME,
        version,
        {
            'seed': seed,
            'trained': False,
            'type': WORLD_TYPE,
            'views': list(views),
            'size': world_size,
        },
    )
    torch.manual_seed(seed + 1)
    cfg = ActionExpertConfig(
        repr_dim=world.config.hidden_size,
        repr_tokens=representation_tokens(world.config),
        num_joints=joints,
        delta_scale=default_delta_scale(robot)[:joints],
        views=len(views),
        arm_chain=arm_chain(robot),
        tcp_offset=list(robot.tcp_offset),
    )
    action = ActionExpert(cfg)
    action.save_pretrained(action_dir)
    write_manifest(
        action_dir,
        ACTION_NAME,
        version,
        {
            'seed': seed,
            'trained': False,
            'type': ACTION_TYPE,
            'period_s': PERIOD_S,
            'world_version': version,
            'joint_names': list(robot.joint_names[:joints]),
        },
    )
    return {'world_dir': world_dir, 'action_dir': action_dir, 'version': version}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--out', default='models')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--views', default='front', help='camera views, comma-separated (front,wrist)')
    ap.add_argument('--world-size', default='tiny', choices=sorted(WORLD_SIZES))
    ap.add_argument(
        '--description',
        default='',
        help="another robot's URDF (joint_limits.yaml beside it): a pair for its joints",
    )
    args = ap.parse_args(argv)
    info = write_default_models(
        args.out,
        args.seed,
        views=tuple(args.views.split(',')),
        world_size=args.world_size,
        robot=description_of_file(args.description),
    )
    print(
        f'default models written: {info["world_dir"]}, {info["action_dir"]} '
        f'(version {info["version"]})'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
