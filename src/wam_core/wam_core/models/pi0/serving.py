"""How a robot maps onto a π0 checkpoint: the manifest's ``pi0`` block and the processor's
files, read and checked before anything serves.

A π0 checkpoint knows image slots, state and action dimensions and normalised units; a
robot has named cameras, named joints in radians and metres, and a control period. The
manifest of a π0 model directory says how one maps onto the other::

    "extra": {
      "type": "pi0",
      "pi0": {
        "views": ["front", "wrist"],      # the robot's camera in each image slot, in slot
                                          # order; "" leaves a slot empty (masked)
        "joints": ["arm_joint_1", ...],   # the robot joint of state/action dimension i
        "scale": [1.0, ...],              # model unit x scale = the joint's unit (rad, m)
        "output": "absolute",             # or "delta" (offsets from the current state)
        "period_s": 0.02,                 # the control period the model was trained at
        "prompt_tokens": 48,              # text tokens after the images
        "num_inference_steps": 10,        # flow-matching steps per chunk
        "noise_seed": 0,                  # the flow starts from this fixed noise
        "max_cache_slots": 16             # ring slots a cache keeps of this model
      }
    }

The processor's ``processor_config.json`` (as ``PI0Processor.save_pretrained`` writes it)
holds the dataset's normalisation statistics (``state_mean``/``state_std``,
``actions_mean``/``actions_std``) and the image processing (``image_processor``: size,
padding, mean/std, resampling, image tokens per image). Every inconsistency is a
:class:`~wam_core.models.contract.ContractError` that says what to change.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

from ...common.robot import RobotDescription
from ..contract import OUTPUTS, ContractError

PROCESSOR_CONFIG = 'processor_config.json'
# resampling filters by PIL's numbering, as image processors save them
RESAMPLE_MODES = {2: 'bilinear', 3: 'bicubic'}


@dataclass(frozen=True)
class ImageProcessing:
    """The processor's image steps: resize (to ``size``, or keeping the aspect within
    ``max_size``), rescale, normalise, pad bottom/right to ``pad_size``."""

    size: tuple[int, int] | None  # exact (height, width)
    max_size: tuple[int, int] | None  # (max_height, max_width), aspect kept
    pad_size: tuple[int, int] | None
    resample: str  # 'bilinear' | 'bicubic'
    rescale_factor: float
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    tokens_per_image: int

    @property
    def output_size(self) -> tuple[int, int]:
        if self.pad_size is not None:
            return self.pad_size
        return self.size if self.size is not None else self.max_size


@dataclass(frozen=True)
class Statistics:
    state_mean: tuple[float, ...]
    state_std: tuple[float, ...]
    actions_mean: tuple[float, ...]
    actions_std: tuple[float, ...]


@dataclass(frozen=True)
class Pi0Serving:
    slots: tuple[str, ...]  # the robot camera per image slot ('' = empty)
    joints: tuple[str, ...]  # the robot joint per state/action dimension
    scale: tuple[float, ...]
    output: str
    period_s: float
    prompt_tokens: int
    num_inference_steps: int
    noise_seed: int
    max_cache_slots: int

    @property
    def views(self) -> tuple[str, ...]:
        """The robot's cameras the model sees, in slot order."""
        return tuple(v for v in self.slots if v)

    @classmethod
    def from_manifest(cls, extra: dict, where: str) -> Pi0Serving:
        block = extra.get('pi0')
        if not isinstance(block, dict):
            raise ContractError(f'{where}: the manifest has no "pi0" block (extra.pi0)')

        def get(key, kind, default=None):
            value = block.get(key, default)
            if value is None or not isinstance(value, kind) or isinstance(value, bool):
                raise ContractError(f'{where}: manifest pi0.{key} is missing or not {kind}')
            return value

        slots = tuple(get('views', list))
        joints = tuple(get('joints', list))
        scale = tuple(float(s) for s in block.get('scale', [1.0] * len(joints)))
        out = cls(
            slots=slots,
            joints=joints,
            scale=scale,
            output=str(block.get('output', 'absolute')),
            period_s=float(get('period_s', (int, float))),
            prompt_tokens=get('prompt_tokens', int, 48),
            num_inference_steps=get('num_inference_steps', int, 10),
            noise_seed=get('noise_seed', int, 0),
            max_cache_slots=get('max_cache_slots', int, 16),
        )
        out.check(where)
        return out

    def check(self, where: str) -> None:
        if not all(isinstance(v, str) for v in self.slots) or not self.views:
            raise ContractError(f'{where}: pi0.views must name at least one camera')
        if len(set(self.views)) != len(self.views):
            raise ContractError(f'{where}: pi0.views repeats a camera: {list(self.slots)}')
        if not self.joints or not all(isinstance(j, str) and j for j in self.joints):
            raise ContractError(f'{where}: pi0.joints must name a joint per dimension')
        if len(set(self.joints)) != len(self.joints):
            raise ContractError(f'{where}: pi0.joints repeats a joint: {list(self.joints)}')
        if len(self.scale) != len(self.joints) or not all(
            math.isfinite(s) and s != 0 for s in self.scale
        ):
            raise ContractError(
                f'{where}: pi0.scale needs one finite, non-zero factor per joint '
                f'({len(self.joints)}), got {list(self.scale)}'
            )
        if self.output not in OUTPUTS:
            raise ContractError(f'{where}: pi0.output {self.output!r} is not one of {OUTPUTS}')
        if not 0.001 <= self.period_s <= 1.0:
            raise ContractError(f'{where}: pi0.period_s {self.period_s} is outside 1 ms .. 1 s')
        if not 1 <= self.prompt_tokens <= 4096:
            raise ContractError(f'{where}: pi0.prompt_tokens {self.prompt_tokens}')
        if not 1 <= self.num_inference_steps <= 1000:
            raise ContractError(f'{where}: pi0.num_inference_steps {self.num_inference_steps}')
        if self.max_cache_slots < 1:
            raise ContractError(f'{where}: pi0.max_cache_slots must be >= 1')

    def check_model(self, config, where: str) -> None:
        """Against the checkpoint's PI0Config: dimensions fit, slots are images."""
        if len(self.joints) > min(config.max_state_dim, config.max_action_dim):
            raise ContractError(
                f'{where}: {len(self.joints)} joints, the model has '
                f'{config.max_state_dim} state and {config.max_action_dim} action dimensions'
            )

    def check_robot(self, robot: RobotDescription, stats: Statistics, where: str) -> None:
        """Against the robot's URDF: every joint named exists and every joint of the robot
        is commanded, once; the statistics, in the robot's units, lie within its limits
        (a model in degrees served as radians, or a gripper in 0..1 served as metres,
        shows up here, not as a lunge)."""
        unknown = [j for j in self.joints if j not in robot.joint_names]
        if unknown:
            raise ContractError(
                f'{where}: pi0.joints names {unknown}, which the robot description does not '
                f'have (its joints: {list(robot.joint_names)})'
            )
        missing = [j for j in robot.joint_names if j not in self.joints]
        if missing:
            raise ContractError(
                f'{where}: the robot joints {missing} have no dimension of the model '
                '(pi0.joints must map every joint the robot commands)'
            )
        means = [('state', stats.state_mean)]
        if self.output == 'absolute':  # a delta model's actions are offsets, near 0
            means.append(('action', stats.actions_mean))
        for i, name in enumerate(self.joints):
            lim = robot.limits[name]
            span = lim.upper - lim.lower
            for what, mean in means:
                value = mean[i] * self.scale[i]
                if not lim.lower - 0.1 * span <= value <= lim.upper + 0.1 * span:
                    raise ContractError(
                        f'{where}: {what} dimension {i} ({name}) has mean {value:g} in the '
                        f"robot's units (scale {self.scale[i]:g}), outside its limits "
                        f'[{lim.lower:g}, {lim.upper:g}]: wrong unit (degrees?) or joint?'
                    )


def read_processor(model_dir: str) -> dict:
    path = os.path.join(model_dir, PROCESSOR_CONFIG)
    try:
        with open(path, encoding='utf-8') as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise ContractError(
            f'{model_dir!r} has no {PROCESSOR_CONFIG} (PI0Processor.save_pretrained writes it)'
        ) from None
    except (OSError, ValueError) as exc:
        raise ContractError(f'unreadable {path!r}: {exc}') from None
    if not isinstance(doc, dict):
        raise ContractError(f'{path!r} is not a JSON object')
    return doc


def statistics(processor: dict, dims: int, where: str) -> Statistics:
    """The dataset's normalisation statistics, one value per served dimension at least."""
    out = {}
    for key in ('state_mean', 'state_std', 'actions_mean', 'actions_std'):
        values = processor.get(key)
        if not isinstance(values, list) or len(values) < dims:
            got = len(values) if isinstance(values, list) else repr(values)
            raise ContractError(
                f'{where}: {PROCESSOR_CONFIG} needs {key} with at least {dims} values (the '
                f'statistics of the dataset the checkpoint was trained on), got {got}'
            )
        try:
            floats = tuple(float(v) for v in values[:dims])
        except (TypeError, ValueError):
            raise ContractError(f'{where}: {PROCESSOR_CONFIG} {key} is not numbers') from None
        if not all(math.isfinite(v) for v in floats):
            raise ContractError(f'{where}: {PROCESSOR_CONFIG} {key} has NaN or inf')
        if key.endswith('_std') and any(v < 0 for v in floats):
            raise ContractError(f'{where}: {PROCESSOR_CONFIG} {key} has a negative deviation')
        out[key] = floats
    return Statistics(**out)


def _pair(d, a: str, b: str) -> tuple[int, int] | None:
    if isinstance(d, dict) and isinstance(d.get(a), int) and isinstance(d.get(b), int):
        return int(d[a]), int(d[b])
    return None


def image_processing(processor: dict, vision_config, where: str) -> ImageProcessing:
    """The image steps of the processor, checked against the vision tower: what comes out
    is the tower's square input, and an image is the tokens the tower makes of it."""
    ip = processor.get('image_processor')
    if not isinstance(ip, dict):
        raise ContractError(f'{where}: {PROCESSOR_CONFIG} has no image_processor block')
    size = ip.get('size') or {}
    exact = _pair(size, 'height', 'width')
    bounded = _pair(size, 'max_height', 'max_width')
    if not ip.get('do_resize', True):
        exact = bounded = None
    pad = _pair(ip.get('pad_size'), 'height', 'width') if ip.get('do_pad', False) else None
    resample = RESAMPLE_MODES.get(int(ip.get('resample', 3)))
    if resample is None:
        raise ContractError(
            f'{where}: image resampling {ip.get("resample")} is not bilinear (2) or bicubic (3)'
        )
    side = int(vision_config.image_size)
    patch = int(vision_config.patch_size)
    out = ImageProcessing(
        size=exact,
        max_size=bounded if exact is None else None,
        pad_size=pad,
        resample=resample,
        rescale_factor=float(ip.get('rescale_factor', 1 / 255))
        if ip.get('do_rescale', True)
        else 1.0,
        mean=tuple(float(m) for m in ip.get('image_mean', (0.5, 0.5, 0.5)))
        if ip.get('do_normalize', True)
        else (0.0, 0.0, 0.0),
        std=tuple(float(s) for s in ip.get('image_std', (0.5, 0.5, 0.5)))
        if ip.get('do_normalize', True)
        else (1.0, 1.0, 1.0),
        tokens_per_image=int(ip.get('image_seq_length', (side // patch) ** 2)),
    )
    if out.size is None and out.max_size is None:
        raise ContractError(f'{where}: the image processor must resize (size or max size)')
    if out.output_size != (side, side):
        raise ContractError(
            f'{where}: the image processor makes {out.output_size} images, the vision tower '
            f'takes {side}x{side}'
        )
    if out.tokens_per_image != (side // patch) ** 2:
        raise ContractError(
            f'{where}: image_seq_length {out.tokens_per_image}, the vision tower makes '
            f'{(side // patch) ** 2} tokens of an image'
        )
    if len(out.mean) != 3 or len(out.std) != 3 or not all(s > 0 for s in out.std):
        raise ContractError(f'{where}: image mean/std must be 3 values, std positive')
    return out
