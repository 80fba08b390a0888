"""The example experts keep the contract they declare, loaded by their registered type."""

import numpy as np
import torch
from wam_plugin_example.experts import write_example_models

from wam_core.models.contract import Observation, check_pair
from wam_core.models.registry import load_action_expert, load_world_expert


def test_the_example_pair_loads_by_type_and_fits_together(tmp_path):
    info = write_example_models(str(tmp_path))
    world = load_world_expert(info['world_dir'])
    action = load_action_expert(info['action_dir'])
    check_pair(world, action)
    assert world.spec.shape == (17, 32) and action.spec.output == 'delta'
    frame = np.random.default_rng(0).integers(0, 256, (128, 128, 3), dtype=np.uint8)
    rep = world.encode(Observation({'front': frame}))  # resized to its 96 px
    assert rep.shape == (17, 32) and world.calls == 1
    chunk = action.decode(
        action.prepare(torch.from_numpy(rep)[None]), torch.zeros(1, 7), torch.zeros(1, 384)
    )
    assert chunk.shape == (1, 10, 7) and float(chunk.abs().max()) <= 0.01
