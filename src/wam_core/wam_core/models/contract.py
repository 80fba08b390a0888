"""The expert contract: what any world-action model must provide to be served.

A model is served as two experts, split where the representation cache splits the work:

- a **world expert** turns one :class:`Observation` (a named set of camera views with
  one stamp, and for a vision-language model the task's text) into a representation,
  once per distinct observation. Its :class:`WorldExpertSpec` says which views it needs
  (name, resolution, encoding), whether the text is part of the observation, and what
  it produces: per view (the representation is the views' outputs stacked along the
  first axis, in the declared order), or one whole tensor (a VLM's prefix key/value
  cache over every view and the prompt), with its dtype.
- an **action expert** turns a representation into a context once (``prepare``) and a
  context plus the current joint state and the task conditioning into a chunk every
  control tick (``decode``). Its :class:`ActionExpertSpec` says its joints, the chunk
  horizon, the control period it was trained at, whether the chunk is absolute
  positions or deltas on the current ones, whether it also gives velocities, and the
  world-expert version it accepts. An action expert may take longer than a control
  period: the serving loop then decodes off the tick (``decode_mode``), never late.

Tensors on the tick's path are torch tensors on the expert's device and dtype
(``prepare``: [1, *representation_shape]; ``decode``: joint state [1, N], conditioning
[1, S] -> [1, H, N]),
so the serving loop never copies a representation it reads from the cache. Both
protocols are ``runtime_checkable``; :func:`check_world_expert` and
:func:`check_action_expert` verify the declarations at load, so a plug-in whose spec
does not add up is refused with the reason before it serves. Implementations register
under the entry-point groups of :mod:`wam_core.models.registry`; nothing in the nodes
names a concrete class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

ENCODINGS = ('rgb8',)  # what the camera adapters deliver today (sensor_msgs encodings)
OUTPUTS = ('absolute', 'delta')
# what a cache holds; bfloat16 travels as its 16-bit words (numpy has no bfloat16)
REPRESENTATION_DTYPES = ('float32', 'float16', 'bfloat16')


class ContractError(ValueError):
    """An expert's declarations do not add up, or its outputs break them."""


@dataclass(frozen=True)
class ViewSpec:
    """One camera view a world expert needs."""

    name: str  # e.g. 'front', 'wrist': the robot's camera of that name
    height: int  # px the expert encodes at (frames of another size are resized)
    width: int
    encoding: str = 'rgb8'

    def check(self) -> None:
        if not self.name or not self.name.replace('_', '').isalnum():
            raise ContractError(f'view name {self.name!r}: letters, digits and _ only')
        if not (0 < self.height <= 4096 and 0 < self.width <= 4096):
            raise ContractError(f'view {self.name!r}: resolution {self.height}x{self.width}')
        if self.encoding not in ENCODINGS:
            raise ContractError(
                f'view {self.name!r}: encoding {self.encoding!r} not in {ENCODINGS}'
            )


@dataclass(frozen=True)
class WorldExpertSpec:
    views: tuple[ViewSpec, ...]
    view_shape: tuple[int, ...] = ()  # what one view becomes, e.g. (tokens, width)
    dtype: str = 'float32'  # of the representation in the cache (REPRESENTATION_DTYPES)
    # the representation depends on the task's text (the active subtask, a VLM's prompt):
    # the text is part of the observation, and of its fingerprint
    prompt: bool = False
    # the whole representation when it is not the views stacked (a VLM prefix over every
    # view and the prompt); None: the views' outputs stacked along axis 0
    whole_shape: tuple[int, ...] | None = None
    # at most this many slots in a cache ring (megabyte representations); 0: as configured
    max_cache_slots: int = 0

    @property
    def view_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.views)

    @property
    def shape(self) -> tuple[int, ...]:
        """The whole representation: ``whole_shape``, or the views' outputs stacked
        along axis 0."""
        if self.whole_shape is not None:
            return tuple(self.whole_shape)
        return (len(self.views) * self.view_shape[0], *self.view_shape[1:])

    @property
    def nbytes(self) -> int:
        """Bytes of one representation in a cache."""
        return int(np.prod(self.shape)) * (4 if self.dtype == 'float32' else 2)

    def check(self) -> None:
        if not self.views:
            raise ContractError('a world expert needs at least one view')
        names = self.view_names
        if len(set(names)) != len(names):
            raise ContractError(f'view names repeat: {names}')
        for v in self.views:
            v.check()
        if self.whole_shape is None and (
            not self.view_shape or any(int(s) <= 0 for s in self.view_shape)
        ):
            raise ContractError(f'view shape {self.view_shape} must be positive')
        if self.whole_shape is not None and (
            not self.whole_shape or any(int(s) <= 0 for s in self.whole_shape)
        ):
            raise ContractError(f'representation shape {self.whole_shape} must be positive')
        if len(self.shape) > 4:
            raise ContractError(f'representation shape {self.shape}: at most 4 dimensions')
        if self.dtype not in REPRESENTATION_DTYPES:
            raise ContractError(
                f'representation dtype {self.dtype!r} is not one of {REPRESENTATION_DTYPES}'
            )
        if self.max_cache_slots < 0:
            raise ContractError(f'max_cache_slots {self.max_cache_slots} must be >= 0')


@dataclass(frozen=True)
class ActionExpertSpec:
    joint_names: tuple[str, ...]  # the order of a chunk's columns and the joint state's
    horizon: int  # rows of a chunk: targets one control period apart
    period_s: float  # the control period it was trained at
    representation_shape: tuple[int, ...]  # what it reads (the world expert's spec.shape)
    # the task conditioning vector (the subtask embedding); 0: it takes none (its task
    # conditioning reaches it through the world expert's prompt)
    conditioning_dim: int
    world_version: str  # the world-expert version whose representations it accepts
    output: Literal['absolute', 'delta'] = 'absolute'  # positions, or offsets from the state
    velocities: bool = False  # whether decode also gives velocities (not used yet)

    def check(self) -> None:
        if not self.joint_names or len(set(self.joint_names)) != len(self.joint_names):
            raise ContractError(f'joint names must be unique and non-empty: {self.joint_names}')
        if self.horizon < 3:
            raise ContractError(f'a chunk needs at least 3 rows, the horizon is {self.horizon}')
        if not 0.001 <= self.period_s <= 1.0:
            raise ContractError(f'control period {self.period_s} s is outside 1 ms .. 1 s')
        if self.output not in OUTPUTS:
            raise ContractError(f'output {self.output!r} is not one of {OUTPUTS}')
        if self.conditioning_dim < 0 or not self.representation_shape:
            raise ContractError('conditioning_dim must be >= 0 and representation_shape non-empty')
        if not self.world_version:
            raise ContractError('the accepted world-expert version is empty')


@dataclass
class Observation:
    """Camera views taken together: name -> HxWx3 uint8 frame, one stamp (ns); and the
    task's text (the active subtask) for a world expert whose spec says ``prompt``."""

    views: Mapping[str, np.ndarray]
    stamp_ns: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    prompt: str = ''


@runtime_checkable
class WorldExpertModel(Protocol):
    spec: WorldExpertSpec
    version: str  # the model version representations are keyed by
    name: str
    calls: int  # observations encoded (the "world-expert calls" metric)
    forwards: int  # forward passes (a batch is one)

    def encode(self, observation: Observation) -> np.ndarray:
        """One observation -> the representation, ``spec.shape`` of ``spec.dtype``."""
        ...

    def encode_batch(self, observations: Sequence[Observation]) -> list[np.ndarray]:
        """Several observations (a fleet's robots) in one forward pass."""
        ...

    def warmup(self, n: int, batch_sizes: tuple[int, ...] = (1,)) -> float:
        """n encodes of a synthetic observation, not counted; mean seconds per encode."""
        ...


@runtime_checkable
class ActionExpertModel(Protocol):
    spec: ActionExpertSpec
    version: str
    name: str
    dtype: Any  # torch dtype of its inputs
    device: Any  # torch device

    def prepare(self, representation) -> Any:
        """[1, *representation_shape] tensor -> a context, once per representation."""
        ...

    def decode(self, context, joint_state, conditioning):
        """context, [1, N] joint state, [1, S] conditioning -> [1, H, N] chunk tensor."""
        ...

    # Optional: decode_batch(contexts, joint_states [B, N], conditioning [B, S]) -> [B, H, N],
    # several robots' decodes in one forward (an action-expert instance serving several
    # robots uses it when present; without it their decodes run one after another).


# the members each protocol requires, to name what a non-conforming expert lacks
WORLD_MEMBERS = (
    'spec',
    'version',
    'name',
    'calls',
    'forwards',
    'encode',
    'encode_batch',
    'warmup',
)
ACTION_MEMBERS = ('spec', 'version', 'name', 'dtype', 'device', 'prepare', 'decode')


def _conforming(expert, protocol, members, spec_type, kind: str):
    if not isinstance(expert, protocol):
        missing = [n for n in members if not hasattr(expert, n)]
        raise ContractError(f'{type(expert).__name__} is not {kind}: lacks {missing}')
    if not isinstance(expert.spec, spec_type):
        raise ContractError(f'{type(expert).__name__}.spec is not a {spec_type.__name__}')
    expert.spec.check()
    return expert


def check_world_expert(expert) -> WorldExpertModel:
    """The expert, if it satisfies the contract (members present, spec consistent)."""
    return _conforming(expert, WorldExpertModel, WORLD_MEMBERS, WorldExpertSpec, 'a world expert')


def check_action_expert(expert) -> ActionExpertModel:
    return _conforming(
        expert, ActionExpertModel, ACTION_MEMBERS, ActionExpertSpec, 'an action expert'
    )


def check_pair(world: WorldExpertModel, action: ActionExpertModel) -> None:
    """The action expert reads what this world expert writes."""
    if action.spec.world_version != world.version:
        raise ContractError(
            f'the action expert accepts world version {action.spec.world_version!r}, '
            f'the world expert is {world.version!r}'
        )
    if tuple(action.spec.representation_shape) != tuple(world.spec.shape):
        raise ContractError(
            f'the action expert reads representations of shape '
            f'{tuple(action.spec.representation_shape)}, the world expert writes '
            f'{tuple(world.spec.shape)}'
        )
