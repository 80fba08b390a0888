"""Which code serves a model directory: its ``type``, found through Python entry points.

A model directory names its type in ``manifest.json`` (``extra.type``). Types are
looked up in the entry-point groups ``wam.world_experts`` and ``wam.action_experts``,
so another package registers an expert in its own packaging metadata, without
touching the stack::

    # setup.py of a plug-in
    entry_points={'wam.world_experts': ['my_encoder = my_pkg.experts:MyWorldExpert']}

An entry point is a callable ``(model_dir, precision=..., device=..., robot=...) ->
expert`` satisfying :mod:`wam_core.models.contract`; ``robot`` is the
:class:`~wam_core.common.robot.RobotDescription` it serves (joints, limits, the
kinematic chain from the URDF). The stack's own types are listed here too
(``BUILTIN``), so the ROS-free core serves its default model from a source checkout
without installed metadata. Loading verifies the manifest first and checks the expert
against the contract; every failure is a :class:`ModelLoadError` naming the directory.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from ..common.robot import TABLETOP_ARM, RobotDescription
from .contract import check_action_expert, check_world_expert
from .manifest import ManifestError, read_manifest, verify_manifest

WORLD_GROUP = 'wam.world_experts'
ACTION_GROUP = 'wam.action_experts'
BUILTIN = {
    WORLD_GROUP: {
        'vit': 'wam_core.models.world_expert:WorldExpert',
        'pi0': 'wam_core.models.pi0.world:Pi0WorldExpert',
    },
    ACTION_GROUP: {
        'object_mlp': 'wam_core.models.action_expert:ObjectMlpExpert',
        'pi0': 'wam_core.models.pi0.action:Pi0ActionExpert',
    },
}


class ModelLoadError(ManifestError):
    """A model directory cannot be served: no type, unknown type, or a broken contract."""


def available(group: str) -> dict[str, str]:
    """type -> 'module:attr' for every registered expert of a group."""
    out = dict(BUILTIN[group])
    for ep in entry_points(group=group):
        out[ep.name] = ep.value
    return out


def model_type(model_dir: str) -> str:
    t = read_manifest(model_dir).extra.get('type')
    if not isinstance(t, str) or not t:
        raise ModelLoadError(
            f'model directory {model_dir!r} names no type (manifest.json extra.type)'
        )
    return t


def _factory(group: str, type_name: str, model_dir: str):
    found = available(group)
    if type_name not in found:
        raise ModelLoadError(
            f'model directory {model_dir!r} has type {type_name!r}, which no installed '
            f'package registers in {group!r} (known: {", ".join(sorted(found))})'
        )
    module, _, attr = found[type_name].partition(':')
    try:
        obj = import_module(module)
        for part in attr.split('.'):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ModelLoadError(f'{group} {type_name!r} ({found[type_name]}): {exc}') from None
    return obj


def _load(group: str, check, model_dir: str, precision: str, device: str, robot):
    verify_manifest(model_dir)  # refuse tampered weights before any plug-in code runs
    factory = _factory(group, model_type(model_dir), model_dir)
    robot = robot if robot is not None else TABLETOP_ARM
    try:
        return check(factory(model_dir, precision=precision, device=device, robot=robot))
    except ModelLoadError:
        raise
    except Exception as exc:  # a plug-in's own failure, whatever it raises: say which model
        raise ModelLoadError(f'{model_dir!r}: {type(exc).__name__}: {exc}') from None


def enable_cuda_graphs(expert, *args) -> None:
    """Capture an expert's fixed-shape forwards as CUDA graphs (``enable_cuda_graphs`` is
    optional in the contract: a plug-in without it is refused with the reason)."""
    enable = getattr(expert, 'enable_cuda_graphs', None)
    if enable is None:
        raise ModelLoadError(
            f'{type(expert).__name__} ({expert.name}) does not support CUDA graphs: '
            'set cuda_graphs: false'
        )
    try:
        enable(*args)
    except Exception as exc:
        raise ModelLoadError(f'CUDA graph capture failed for {expert.name}: {exc}') from None


def enable_torchscript(expert, batch_sizes: tuple[int, ...]) -> str:
    """Run an expert's CPU forward as TorchScript graphs, outside the GIL
    (``enable_torchscript`` is optional in the contract: a plug-in without it keeps its
    own forward). Returns why not, '' when done."""
    enable = getattr(expert, 'enable_torchscript', None)
    if enable is None:
        return f'{type(expert).__name__} has no enable_torchscript'
    try:
        return enable(batch_sizes) or ''
    except Exception as exc:  # a plug-in's failure: it keeps its eager forward
        return f'{type(exc).__name__}: {exc}'


def load_world_expert(
    model_dir: str,
    precision: str = 'fp32',
    device: str = 'cpu',
    robot: RobotDescription | None = None,
):
    """The world expert serving ``model_dir`` (a :class:`WorldExpertModel`)."""
    return _load(WORLD_GROUP, check_world_expert, model_dir, precision, device, robot)


def load_action_expert(
    model_dir: str,
    precision: str = 'fp32',
    device: str = 'cpu',
    robot: RobotDescription | None = None,
):
    """The action expert serving ``model_dir`` for ``robot`` (default: the shipped arm)."""
    return _load(ACTION_GROUP, check_action_expert, model_dir, precision, device, robot)
