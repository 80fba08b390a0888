"""π0's action expert (type ``pi0``): the robot's state and the cached prefix -> a chunk of
joint targets, by flow matching.

This is the second half of ``PI0ForConditionalGeneration.sample_actions``: from noise, a
fixed number of Euler steps of the velocity the DiT predicts while attending to the VLM
prefix, the state in the suffix. With the same noise, state and prefix the chunk equals
``sample_actions`` (the tests hold it to 1e-5; it is exact in fp32 here).

- ``prepare`` copies the representation once into a private tensor (a cache ring's slot
  is rewritten while this context still serves later decodes) and builds a read-only
  prefix cache over it (:mod:`.prefix`): nothing a step computes lands in it, and nothing
  lands in the shared representation.
- ``decode`` takes the joint state in the robot's units and command order, maps it onto
  the model's state dimensions (the manifest's joints and scale), normalises it with the
  dataset's statistics and pads it; after the steps it un-normalises the actions, maps
  them back onto the robot's joints and units, absolute or delta as declared. The flow
  starts from fixed, seeded noise: the same inputs give the same chunk.

A chunk has the model's ``chunk_size`` rows at its ``period_s``; the serving loop
resamples it onto the control period. On a CPU a decode takes longer than a 20 ms
period: the serving loop decodes it off the tick.
"""

from __future__ import annotations

import torch

from ...common.robot import TABLETOP_ARM, RobotDescription
from ..contract import ActionExpertSpec, ContractError
from .load import geometry, load_pi0
from .prefix import Pi0Prefix, planes
from .serving import image_processing, statistics

EPS = 1e-8  # as PI0Processor.normalize


class Pi0Context:
    """A prepared prefix and its read-only cache, reused by every decode."""

    def __init__(self, prefix: Pi0Prefix):
        self.prefix = prefix
        self.cache = prefix.cache()


class Pi0ActionExpert:
    def __init__(
        self,
        model_dir: str,
        precision: str = 'fp32',
        device: str = 'cpu',
        robot: RobotDescription = TABLETOP_ARM,
    ):
        self.manifest, self.serving, processor, model = load_pi0(
            model_dir, precision, device, keep='dit'
        )
        where = repr(model_dir)
        self.name, self.version = self.manifest.name, self.manifest.version
        self.model = model
        cfg = model.config
        self.dtype = next(model.parameters()).dtype
        self.device = torch.device(device)
        layers, kv_heads, head_dim = geometry(cfg)
        dit = cfg.dit_config
        dit_head = getattr(dit, 'head_dim', None) or dit.hidden_size // dit.num_attention_heads
        if (dit.num_hidden_layers, dit.num_key_value_heads, dit_head) != (
            layers,
            kv_heads,
            head_dim,
        ):
            raise ContractError(
                f'{where}: the DiT ({dit.num_hidden_layers} layers, {dit.num_key_value_heads} '
                f'kv heads of {dit_head}) cannot attend to the VLM cache ({layers}, {kv_heads}, '
                f'{head_dim})'
            )
        serving = self.serving
        stats = statistics(processor, len(serving.joints), where)
        serving.check_robot(robot, stats, where)
        steps = image_processing(processor, cfg.vlm_config.vision_config, where)
        prefix_len = steps.tokens_per_image * len(serving.views) + serving.prompt_tokens
        self.kv_heads = kv_heads
        self.spec = ActionExpertSpec(
            joint_names=tuple(robot.joint_names),
            horizon=int(cfg.chunk_size),
            period_s=serving.period_s,
            representation_shape=(planes(layers, kv_heads), prefix_len, head_dim),
            conditioning_dim=0,  # the subtask reaches it in the world expert's prompt
            world_version=self.manifest.version,
            output=serving.output,
        )
        self.num_steps = serving.num_inference_steps
        dims = len(serving.joints)
        f32 = dict(dtype=torch.float32, device=self.device)
        scale = torch.tensor(serving.scale, **f32)
        self._state_mean = torch.tensor(stats.state_mean, **f32)
        self._state_std = torch.tensor(stats.state_std, **f32) + EPS
        self._action_mean = torch.tensor(stats.actions_mean, **f32)
        self._action_std = torch.tensor(stats.actions_std, **f32) + EPS
        self._scale = scale
        # robot joint j (command order) is model dimension index[j]; model dimension d is
        # robot joint joint_of[d]
        self._dim_of_joint = torch.tensor(
            [serving.joints.index(j) for j in robot.joint_names], device=self.device
        )
        self._joint_of_dim = torch.tensor(
            [list(robot.joint_names).index(j) for j in serving.joints], device=self.device
        )
        self._dims = dims
        self.max_state_dim = int(cfg.max_state_dim)
        self.max_action_dim = int(cfg.max_action_dim)
        gen = torch.Generator().manual_seed(serving.noise_seed)
        self.noise = torch.randn(
            (1, int(cfg.chunk_size), self.max_action_dim), generator=gen, dtype=torch.float32
        ).to(self.device, self.dtype)

    # the contract -----------------------------------------------------------------
    def prepare(self, representation: torch.Tensor) -> Pi0Context:
        """[1, planes, P, D] -> a context over a private copy of it."""
        private = representation.to(self.device, self.dtype, copy=True).contiguous()
        return Pi0Context(Pi0Prefix.unpack(private, self.kv_heads))

    @torch.inference_mode()
    def decode(self, context: Pi0Context, joint_state: torch.Tensor, conditioning=None):
        """[1, N] joint state (robot units, command order) -> [1, chunk, N] targets (or
        offsets, for a delta model) in the robot's units at the model's period."""
        return self.to_robot(self.flow(context, self.model_state(joint_state)))

    # the steps ----------------------------------------------------------------------
    def model_state(self, joint_state: torch.Tensor) -> torch.Tensor:
        """Robot joint state [B, N] -> the model's normalised, padded state [B, max_state_dim]."""
        q = joint_state.to(self.device, torch.float32)[:, self._joint_of_dim] / self._scale
        state = (q - self._state_mean) / self._state_std
        state = torch.nn.functional.pad(state, (0, self.max_state_dim - self._dims))
        return state.to(self.dtype)

    @torch.inference_mode()
    def flow(self, context: Pi0Context, state: torch.Tensor, noise=None) -> torch.Tensor:
        """``num_steps`` Euler steps from ``noise`` (default: the fixed noise) against the
        prefix -> normalised actions [B, chunk, max_action_dim], as ``sample_actions``."""
        x = self.noise if noise is None else noise
        dt = -1.0 / self.num_steps
        batch = state.shape[0]
        for step in range(self.num_steps):
            t = torch.full((batch,), 1.0 + step * dt, dtype=torch.float32, device=self.device)
            out = self.model(
                state=state,
                noise=x,
                timestep=t,
                attention_mask=context.prefix.mask,
                past_key_values=context.cache,
            )
            x = x + dt * out.logits
        return x

    def to_robot(self, actions: torch.Tensor) -> torch.Tensor:
        """Normalised actions [B, chunk, max_action_dim] -> [B, chunk, N] in the robot's
        units and joint order."""
        a = actions[..., : self._dims].float() * self._action_std + self._action_mean
        a = a * self._scale
        return a[..., self._dim_of_joint]
