"""Which model a demo serves: the shipped pair (default) or a preset with its own
parameter overlay and model directory, written on first use.

    make demo MODEL=pi0         # python -m robot_agent.stack --model pi0

``pi0``: the tiny π0 (transformers' PI0ForConditionalGeneration, random weights) from
``models/pi0_tiny``, served through ``config/pi0.yaml`` after ``config/wam.yaml``. Its
weights are untrained: the arm moves under the gate, the task is not expected to succeed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from wam_core.common.paths import workspace_root


@dataclass(frozen=True)
class ModelPreset:
    overlay: str  # a parameter file after config/wam.yaml (relative to the workspace)
    model_dir: str  # the directory it serves (relative to the workspace)
    write: Callable[[str], object]  # writes the directory when it is missing


def _write_tiny_pi0(out: str) -> None:
    from wam_core.models.pi0.write import write_pi0

    write_pi0(out, 'tiny', ('front', 'wrist'))


PRESETS: dict[str, ModelPreset | None] = {
    'default': None,  # the shipped pair of config/wam.yaml (models/world_expert, ...)
    'pi0': ModelPreset('config/pi0.yaml', 'models/pi0_tiny', _write_tiny_pi0),
}


def prepare(name: str, log=print) -> list[str]:
    """The parameter overlays of preset ``name`` (absolute paths; [] for the default),
    after writing its model directory if it is missing. ValueError for an unknown one."""
    if name not in PRESETS:
        raise ValueError(f'unknown model {name!r} (known: {", ".join(PRESETS)})')
    preset = PRESETS[name]
    if preset is None:
        return []
    root = workspace_root()
    model_dir = os.path.join(root, preset.model_dir)
    if not os.path.exists(os.path.join(model_dir, 'manifest.json')):
        log(f'writing the {name} model to {preset.model_dir} (first use, a few seconds)')
        preset.write(model_dir)
    return [os.path.join(root, preset.overlay)]
