"""The action expert's parts that need no training: the chunk bounds, its declared input."""

import torch

from wam_core.common.robot import TABLETOP_ARM
from wam_core.models.action_expert import (
    ActionExpert,
    ActionExpertConfig,
    SceneState,
    default_delta_scale,
)


def test_chunks_start_from_the_joint_state_and_stay_within_the_bound():
    torch.manual_seed(0)
    model = ActionExpert(ActionExpertConfig(delta_scale=default_delta_scale(TABLETOP_ARM))).eval()
    with torch.no_grad():
        for p in model.mlp[-1].parameters():
            p.normal_(0.0, 5.0)  # saturate the tanh: the bound must still hold
        q = torch.rand(4, 7) - 0.5
        rep = torch.randn(4, *model.representation_shape)
        chunk = model.decode(model.prepare(rep), q, torch.zeros(4, 384))
        assert chunk.shape == (4, 16, 7)
        delta = (chunk - q[:, None]).abs()
        assert torch.all(delta <= torch.tensor(model.config.delta_scale) + 1e-6)
        assert delta.max() > 0.4  # saturated: the arm joints reach their 0.5 rad bound
        # the objects are an input: moving the apple changes the chunk
        scene = SceneState(torch.zeros(4, 5))
        moved = SceneState(torch.tensor([[0.1, 0.0, 0.0, 0.0, 0.0]]).repeat(4, 1))
        assert not torch.allclose(
            model.decode(scene, q, torch.zeros(4, 384)),
            model.decode(moved, q, torch.zeros(4, 384)),
        )


def test_the_declared_representation_shape_is_the_default_world_experts():
    from wam_core.models.world_expert import default_world_config, representation_tokens

    world = default_world_config()
    model = ActionExpert(ActionExpertConfig(repr_tokens=representation_tokens(world)))
    assert model.representation_shape == (65, world.hidden_size)
