"""The action expert's forward kinematics in torch against the simulated arm's."""

import numpy as np
import torch

from wam_core.models.action_expert import ActionExpertConfig, tcp_position
from wam_sim.tabletop import TABLE_Z, TcpKinematics


def test_torch_forward_kinematics_matches_the_simulated_arm():
    cfg = ActionExpertConfig()
    rng = np.random.default_rng(0)
    q = rng.uniform(-1.5, 1.5, (20, 7))
    fk = TcpKinematics()
    tcp = tcp_position(torch.from_numpy(q), cfg.arm_chain, cfg.tcp_offset).numpy()
    for qi, ti in zip(q, tcp, strict=True):
        # the sim's world frame puts the robot base on the table top
        assert np.allclose(ti + [0.0, 0.0, TABLE_Z], fk(qi), atol=1e-6)
