"""The action expert's parts that need no training: forward kinematics and the chunk bounds."""

import numpy as np
import torch

from wam_core.action_expert import (
    ActionExpert,
    ActionExpertConfig,
    SceneState,
    default_delta_scale,
    tcp_position,
)
from wam_core.diagnose import TcpKinematics
from wam_core.sim import JOINT_NAMES, TABLE_Z


def test_torch_forward_kinematics_matches_the_simulated_arm():
    cfg = ActionExpertConfig()
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.5, 1.5, (20, 7))
    fk = TcpKinematics()
    tcp = tcp_position(torch.from_numpy(q), cfg.arm_chain, cfg.tcp_offset).numpy()
    for qi, ti in zip(q, tcp):
        # the sim's world frame puts the robot base on the table top
        assert np.allclose(ti + [0.0, 0.0, TABLE_Z], fk(qi), atol=1e-6)


def test_chunks_start_from_the_joint_state_and_stay_within_the_bound():
    torch.manual_seed(0)
    model = ActionExpert(ActionExpertConfig(delta_scale=default_delta_scale(JOINT_NAMES))).eval()
    with torch.no_grad():
        for p in model.mlp[-1].parameters():
            p.normal_(0.0, 5.0)  # saturate the tanh: the bound must still hold
        q = torch.rand(4, 7) - 0.5
        rep = torch.randn(4, 65, 192)
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
