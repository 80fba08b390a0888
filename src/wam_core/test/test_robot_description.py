"""The robot described by a URDF: the one source of joints, limits and the chain."""

import os
import shutil

import pytest

from wam_core.common.config import ActionExpertParams
from wam_core.common.params import ConfigError, load_params
from wam_core.common.paths import default_config, workspace_root
from wam_core.common.robot import (
    TABLETOP_ARM,
    TABLETOP_LIMITS,
    TABLETOP_URDF,
    load_robot_description,
)
from wam_core.models.contract import ContractError
from wam_core.models.registry import ModelLoadError, load_action_expert

MODELS = os.path.join(workspace_root(), 'models')


def test_the_shipped_arm_comes_from_its_urdf():
    arm = TABLETOP_ARM
    assert arm.joint_names == (*(f'arm_joint_{i}' for i in range(1, 7)), 'gripper_joint')
    assert arm.prismatic == {'gripper_joint'} and arm.mimics == {'finger_r_joint': 'gripper_joint'}
    assert [j.axis for j in arm.chain] == ['z', 'y', 'y', 'y', 'x', 'y']
    assert arm.chain[2].offset == (0.3, 0.0, 0.0) and arm.tcp_offset == (0.09, 0.0, 0.0)
    # velocity and effort from the URDF, acceleration from joint_limits.yaml
    assert arm.limits['arm_joint_1'].velocity == 1.5 and arm.limits['arm_joint_1'].effort == 50
    assert arm.limits['arm_joint_1'].acceleration == 8.0
    assert arm.limits['gripper_joint'].acceleration == 1.0
    assert '<robot name="tabletop_arm">' in arm.urdf


def test_the_parameter_file_limits_are_the_urdfs():
    cfg = load_params(default_config(), 'action_expert', ActionExpertParams)
    assert cfg.robot.description() is TABLETOP_ARM
    assert cfg.joint_limits == dict(TABLETOP_ARM.limits)


def _variant(tmp_path, old, new):
    d = tmp_path / 'arm'
    d.mkdir()
    with open(TABLETOP_URDF) as fh:
        text = fh.read()
    assert old in text
    (d / 'arm.urdf').write_text(text.replace(old, new, 1))
    shutil.copy(TABLETOP_LIMITS, d / 'joint_limits.yaml')
    return str(d / 'arm.urdf')


def test_another_arm_is_another_urdf_and_the_shipped_model_refuses_it(tmp_path):
    urdf = _variant(tmp_path, 'xyz="0.3 0 0"', 'xyz="0.35 0 0"')  # a longer upper arm
    arm = load_robot_description(urdf, str(tmp_path / 'arm' / 'joint_limits.yaml'))
    assert arm.chain[2].offset == (0.35, 0.0, 0.0)
    with pytest.raises(ModelLoadError, match='trained for the arm chain'):
        load_action_expert(os.path.join(MODELS, 'action_expert'), robot=arm)


@pytest.mark.parametrize(
    'old,new,reason',
    [
        ('rpy="0 0 0"/><axis xyz="0 1 0"/>', 'rpy="0 0.3 0"/><axis xyz="0 1 0"/>', 'rotated'),
        ('<axis xyz="0 0 1"/>', '<axis xyz="0 0.6 0.8"/>', 'not along x, y or z'),
        ('<limit lower="-2.9" upper="2.9" velocity="1.5" effort="50"/>', '', 'no <limit>'),
        ('<robot name="tabletop_arm">', '<robot name="tabletop_arm"', 'cannot read the URDF'),
    ],
)
def test_a_urdf_the_stack_cannot_serve_is_refused_with_the_reason(tmp_path, old, new, reason):
    with pytest.raises(ConfigError, match=reason):
        load_robot_description(_variant(tmp_path, old, new))


def test_a_missing_description_file_is_a_config_error():
    with pytest.raises(ConfigError, match='cannot read the URDF'):
        load_robot_description('/nonexistent/arm.urdf')


def test_contract_error_is_a_value_error():  # the nodes' configure catches ValueError
    assert issubclass(ContractError, ValueError)


def test_a_fixed_flange_on_the_way_to_the_tcp_adds_its_offset(tmp_path):
    urdf = _variant(
        tmp_path,
        '<parent link="link6"/><child link="tcp"/>\n    <origin xyz="0.09 0 0" rpy="0 0 0"/>',
        '<parent link="flange"/><child link="tcp"/>\n    <origin xyz="0.09 0 0" rpy="0 0 0"/>'
        '\n  </joint>\n  <link name="flange"/>\n  <joint name="flange_joint" type="fixed">'
        '\n    <parent link="link6"/><child link="flange"/><origin xyz="0.01 0 0"/>',
    )
    arm = load_robot_description(urdf)
    assert arm.tcp_offset == pytest.approx((0.1, 0.0, 0.0))
    assert [j.name for j in arm.chain] == [f'arm_joint_{i}' for i in range(1, 7)]


def test_a_continuous_joint_is_refused_with_the_reason(tmp_path):
    """(issue 24, item 3) It was silently left out of the commanded joints; the gate and
    its braking rule keep commands inside position limits, so it is refused instead."""
    urdf = _variant(
        tmp_path,
        '<joint name="arm_joint_5" type="revolute">',
        ('<joint name="arm_joint_5" type="continuous">'),
    )
    with pytest.raises(ConfigError, match="joint 'arm_joint_5': a continuous joint is not served"):
        load_robot_description(urdf)
