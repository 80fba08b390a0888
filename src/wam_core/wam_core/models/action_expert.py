"""Action expert: object positions from the world representation, then a state-feedback MLP.

Two parts, split where the serving cache splits the work:

- ``prepare`` (once per representation): an object head reads the representation's
  first (CLS) token and estimates where the apple (xyz) and the fridge (xy) are, in
  metres in the robot's base frame. The world expert is trained with the same
  head, so the ViT learns to put exactly that in its CLS token.
- ``decode`` (every 50 Hz tick): forward kinematics of the current joint state gives
  the TCP position; an MLP maps the joint state, the TCP, the object positions and
  their offsets from the TCP, and the subtask vector to a chunk of joint targets.

Why an explicit bottleneck: a cross-attention decoder cloned end to end from one front
camera learned an image cue ("open fingers around the red cube") instead of geometry,
stopped 14 cm short of the apple where the cue fires along the camera ray, and solved
0 of 10 held-out episodes; the same demonstrations through this MLP, given object
positions with 3-5 mm noise, solved 30 of 30. The joint state says exactly where
the arm is; the image only has to say where the objects are.

Output: joint position targets [H, N] (radians; metres for the prismatic gripper) at
the control period, as bounded residuals on the current joint positions.

Served as the action-expert type ``object_mlp`` (:class:`ObjectMlpExpert`, the
contract's face of the torch module).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from transformers import PretrainedConfig, PreTrainedModel

from ..common.quiet_loading import no_progress_bars
from ..common.robot import TABLETOP_ARM, RobotDescription
from .contract import ActionExpertSpec, ContractError
from .cuda_graphs import GraphedCall, device_unavailable
from .manifest import verify_manifest
from .precision import float_dtype, resolve_precision


def arm_chain(robot: RobotDescription) -> list:
    """The robot's chain from the base frame to the TCP, as the model's config keeps it:
    per revolute joint, the offset of its body from the previous one (m) and its axis.
    Forward kinematics in torch keeps the decode one small graph with no round trip to a
    physics engine."""
    return [[list(j.offset), j.axis] for j in robot.chain]


ARM_CHAIN = arm_chain(TABLETOP_ARM)  # from the URDF (wam_core/common/description)
TCP_OFFSET = list(TABLETOP_ARM.tcp_offset)
OBJECTS = 5  # apple x, y, z and fridge x, y (m, base frame)
_FEATURES = 3 + 3 + 1 + 2 + 2  # TCP, apple - TCP, apple height, fridge - TCP, fridge - apple


def default_delta_scale(robot: RobotDescription = TABLETOP_ARM) -> list[float]:
    """Per-joint bound on a chunk's distance from the current position: 0.5 rad for a
    revolute joint, 5 cm for a prismatic one (a gripper), as the robot description says
    (not as a joint's name suggests)."""
    return [0.05 if n in robot.prismatic else 0.5 for n in robot.joint_names]


class ActionExpertConfig(PretrainedConfig):
    model_type = 'wam_action_expert'

    def __init__(
        self,
        repr_dim: int = 192,
        repr_tokens: int = 65,
        hidden: int = 512,
        num_layers: int = 3,
        chunk_size: int = 16,
        num_joints: int = 7,
        subtask_dim: int = 384,
        subtask_features: int = 32,
        max_delta: float = 0.5,
        delta_scale=None,
        arm_chain=None,
        tcp_offset=None,
        views: int = 1,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # camera views in the representation ([views * tokens, width], views stacked):
        # the object head reads every view's CLS token
        self.views = views
        self.repr_dim = repr_dim
        # tokens of the representation it reads (the default world expert: 8 x 8 patches
        # + CLS); prepare reads only the CLS token, warm-up feeds this shape
        self.repr_tokens = repr_tokens
        self.hidden = hidden
        self.num_layers = num_layers
        self.chunk_size = chunk_size
        self.num_joints = num_joints
        self.subtask_dim = subtask_dim
        self.subtask_features = subtask_features
        self.max_delta = max_delta  # bound on |target - current| per point, rad
        # per-joint bound on |target - current| (rad, or m for a prismatic gripper);
        # a gripper bounded by 0.5 m would need a tiny tanh input and saturates easily
        self.delta_scale = (
            list(delta_scale) if delta_scale is not None else [max_delta] * num_joints
        )
        self.arm_chain = arm_chain if arm_chain is not None else ARM_CHAIN
        self.tcp_offset = list(tcp_offset) if tcp_offset is not None else TCP_OFFSET
        if len(self.arm_chain) > num_joints:
            raise ValueError(
                f'the arm chain has {len(self.arm_chain)} joints, the model only {num_joints}'
            )


@dataclass
class SceneState:
    """What ``prepare`` extracts from one representation: object positions [B, 5] (m, base
    frame)."""

    objects: torch.Tensor


def _axis_rotation(axis: str, angle: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(angle), torch.sin(angle)
    o, z = torch.ones_like(angle), torch.zeros_like(angle)
    rows = {
        'x': [[o, z, z], [z, c, -s], [z, s, c]],
        'y': [[c, z, s], [z, o, z], [-s, z, c]],
        'z': [[c, -s, z], [s, c, z], [z, z, o]],
    }[axis]
    return torch.stack([torch.stack(r, -1) for r in rows], -2)


def tcp_position(joint_state: torch.Tensor, chain, tcp_offset) -> torch.Tensor:
    """Joint positions [B, N] -> TCP position [B, 3] in the base frame. The offsets may be
    lists or tensors already on the joint state's device and dtype (then nothing is
    copied from the host: what a CUDA graph capture needs)."""
    b, dtype, device = joint_state.shape[0], joint_state.dtype, joint_state.device
    p = joint_state.new_zeros(b, 3)
    r = torch.eye(3, dtype=dtype, device=device).expand(b, 3, 3)
    for i, (offset, axis) in enumerate(chain):
        p = p + r @ torch.as_tensor(offset, dtype=dtype, device=device)
        r = r @ _axis_rotation(axis, joint_state[:, i])
    return p + r @ torch.as_tensor(tcp_offset, dtype=dtype, device=device)


class ActionExpert(PreTrainedModel):
    config_class = ActionExpertConfig
    base_model_prefix = 'action_expert'
    main_input_name = 'representation'

    def __init__(self, config: ActionExpertConfig):
        super().__init__(config)
        d = config.repr_dim
        dv = d * config.views  # every view's CLS token, side by side
        # the CLS token's scale moves while the ViT trains: normalise it first
        self.object_head = nn.Sequential(
            nn.LayerNorm(dv), nn.Linear(dv, d), nn.GELU(), nn.Linear(d, OBJECTS)
        )
        self.subtask_proj = nn.Linear(config.subtask_dim, config.subtask_features)
        h = config.hidden
        layers, width = [], config.num_joints + _FEATURES + config.subtask_features
        for _ in range(config.num_layers):
            layers += [nn.Linear(width, h), nn.GELU()]
            width = h
        layers.append(nn.Linear(width, config.chunk_size * config.num_joints))
        self.mlp = nn.Sequential(*layers)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    @property
    def representation_shape(self) -> tuple[int, int]:
        """[views * tokens, width] of the world-expert representation it reads."""
        return (self.config.views * self.config.repr_tokens, self.config.repr_dim)

    def objects(self, representation: torch.Tensor) -> torch.Tensor:
        """Representation [B, V*T, Dw] -> apple xyz, fridge xy [B, 5] (m, base frame),
        from the CLS token of every view."""
        v = self.config.views
        if v == 1:
            return self.object_head(representation[:, 0])
        per = representation.shape[1] // v
        return self.object_head(representation[:, ::per][:, :v].flatten(1))

    def prepare(self, representation: torch.Tensor) -> SceneState:
        return SceneState(self.objects(representation))

    def decode(
        self, scene: SceneState, joint_state: torch.Tensor, subtask: torch.Tensor
    ) -> torch.Tensor:
        """joint_state [B, N], subtask [B, S] -> joint position targets [B, H, N]."""
        return self.act(scene.objects, joint_state, subtask)

    def act(
        self, objects: torch.Tensor, joint_state: torch.Tensor, subtask: torch.Tensor
    ) -> torch.Tensor:
        """The tick's policy from object positions [B, 5] (estimated, or given in training)."""
        cfg = self.config
        scale = self._delta_scale(joint_state)
        chain, tcp_offset, home = self._constants(joint_state)
        tcp = tcp_position(joint_state, chain, tcp_offset)
        apple, fridge = objects[:, :3], objects[:, 3:5]
        # features scaled to a few units over the workspace: joints by their step bound
        # (x2.5 for an arm joint, x25 for the 4 cm gripper, whose 2 mm moves matter)
        features = torch.cat(
            [
                joint_state * (1.25 / scale),
                (tcp - home) * 5.0,
                (apple - tcp) * 10.0,
                apple[:, 2:3] * 10.0,
                (fridge - tcp[:, :2]) * 5.0,
                (fridge - apple[:, :2]) * 5.0,
                self.subtask_proj(subtask),
            ],
            dim=1,
        )
        out = self.mlp(features).view(-1, cfg.chunk_size, cfg.num_joints)
        return joint_state.unsqueeze(1) + torch.tanh(out) * scale

    def _delta_scale(self, like: torch.Tensor) -> torch.Tensor:
        # Built from the config on first use, not a buffer: from_pretrained creates the
        # module without initialising buffers that are not in the weights file.
        s = self.__dict__.get('_scale')
        if s is None or s.dtype != like.dtype or s.device != like.device:
            s = torch.tensor(self.config.delta_scale, dtype=like.dtype, device=like.device)
            self.__dict__['_scale'] = s
        return s

    def _constants(self, like: torch.Tensor):
        """The chain's offsets, the TCP offset and the workspace home as tensors on the
        joint state's device and dtype, made once (not inside every tick, nor a graph)."""
        cfg = self.config
        key = (
            like.dtype,
            like.device,
            torch.is_inference_mode_enabled(),  # inference tensors cannot join autograd
            tuple((tuple(offset), axis) for offset, axis in cfg.arm_chain),
            tuple(cfg.tcp_offset),
        )
        cached = self.__dict__.get('_consts')
        if cached is None or cached[0] != key:
            t = lambda v: torch.tensor(v, dtype=like.dtype, device=like.device)  # noqa: E731
            chain = [(t(offset), axis) for offset, axis in self.config.arm_chain]
            cached = (key, (chain, t(self.config.tcp_offset), t([0.45, 0.0, 0.15])))
            self.__dict__['_consts'] = cached
        return cached[1]

    def forward(self, representation, joint_state, subtask):
        """Unified path (baseline, reference sample): prepare + decode in one call."""
        return self.decode(self.prepare(representation), joint_state, subtask)


def _close(a, b, tol: float = 1e-6) -> bool:
    return len(a) == len(b) and all(
        abs(float(x) - float(y)) <= tol for x, y in zip(a, b, strict=True)
    )


def _same_chain(a, b) -> bool:
    return len(a) == len(b) and all(
        _close(ja[0], jb[0]) and ja[1] == jb[1] for ja, jb in zip(a, b, strict=True)
    )


def load_action_expert(model_dir: str, precision: str = 'fp32', device: str = 'cpu'):
    """Verify the manifest, then load with from_pretrained. Returns (model, manifest)."""

    manifest = verify_manifest(model_dir)
    with no_progress_bars():
        model = ActionExpert.from_pretrained(
            model_dir, dtype=float_dtype(resolve_precision(precision))
        )
    model.eval().to(torch.device(device))
    return model, manifest


class ObjectMlpExpert:
    """The ``object_mlp`` action expert as the contract sees it (:mod:`.contract`). Its
    forward kinematics take the robot's chain from the URDF; a model trained for an arm
    whose chain differs is refused."""

    def __init__(
        self,
        model_dir: str,
        precision: str = 'fp32',
        device: str = 'cpu',
        robot: RobotDescription = TABLETOP_ARM,
    ):
        why = device_unavailable(device)
        if why:
            raise ContractError(why)
        self.module, self.manifest = load_action_expert(model_dir, precision, device)
        self._prepare_graph: GraphedCall | None = None
        self._decode_graph: GraphedCall | None = None
        self.name, self.version = self.manifest.name, self.manifest.version
        cfg, extra = self.module.config, self.manifest.extra
        chain, tcp = arm_chain(robot), list(robot.tcp_offset)
        if not _same_chain(cfg.arm_chain, chain) or not _close(cfg.tcp_offset, tcp):
            raise ContractError(
                f'{model_dir!r} was trained for the arm chain {cfg.arm_chain} (TCP '
                f'{cfg.tcp_offset}); the robot description has {chain} (TCP {tcp})'
            )
        cfg.arm_chain, cfg.tcp_offset = chain, tcp
        joints = extra.get('joint_names')
        world = extra.get('world_version')
        if not isinstance(joints, list) or len(joints) != cfg.num_joints:
            raise ContractError(
                f'{model_dir!r}: manifest extra.joint_names must list its {cfg.num_joints} joints'
            )
        if not isinstance(world, str) or not world:
            raise ContractError(f'{model_dir!r}: manifest extra.world_version is missing')
        self.spec = ActionExpertSpec(
            joint_names=tuple(joints),
            horizon=cfg.chunk_size,
            period_s=float(extra.get('period_s', 0.02)),
            representation_shape=self.module.representation_shape,
            conditioning_dim=cfg.subtask_dim,
            world_version=world,
            output='absolute',
        )
        self.dtype = next(self.module.parameters()).dtype
        self.device = next(self.module.parameters()).device

    def prepare(self, representation: torch.Tensor) -> SceneState:
        if self._prepare_graph is not None:
            # a copy: the graph's buffer is rewritten by the next prepare, while this
            # context still serves the ticks until then
            return SceneState(self._prepare_graph(representation).clone())
        return self.module.prepare(representation)

    def decode(self, context: SceneState, joint_state: torch.Tensor, conditioning: torch.Tensor):
        if self._decode_graph is not None:
            return self._decode_graph(context.objects, joint_state, conditioning)
        return self.module.decode(context, joint_state, conditioning)

    def decode_batch(self, contexts: list[SceneState], joint_states, conditioning):
        """Several robots' decodes in one forward (an action-expert instance): contexts
        from ``prepare``, [B, N] joint states, [B, S] conditioning -> [B, H, N]. Outside
        the batch-1 CUDA graphs."""
        objects = torch.cat([c.objects for c in contexts])
        return self.module.act(objects, joint_states, conditioning)

    def enable_cuda_graphs(self) -> None:
        """Capture prepare and decode (batch 1, the tick's shapes) as CUDA graphs. Needs
        the CUDA device. decode's output is the graph's buffer: the ticker copies it to
        the host before the next tick."""
        if self.device.type != 'cuda':
            raise ContractError('CUDA graphs need the action expert on a CUDA device')
        cfg = self.module.config
        like = dict(dtype=self.dtype, device=self.device)
        rep = torch.zeros((1, *self.module.representation_shape), **like)
        objects = torch.zeros((1, OBJECTS), **like)
        joints = torch.zeros((1, cfg.num_joints), **like)
        subtask = torch.zeros((1, cfg.subtask_dim), **like)
        self._prepare_graph = GraphedCall(lambda r: self.module.objects(r), [rep])
        self._decode_graph = GraphedCall(
            lambda o, j, s: self.module.act(o, j, s), [objects, joints, subtask]
        )
