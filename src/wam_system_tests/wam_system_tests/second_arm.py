"""A second arm for the tests: not the tabletop arm, served with no code change.

Its URDF is the tabletop arm's kinematics under other names (a robot named
``second_arm``, joints ``shoulder_pan`` .. ``wrist_roll`` and a prismatic ``finger``),
with tighter limits on two joints, and a joint_limits.yaml beside it in ros2_control's
layout; ``overlay`` is the parameter file that points the stack at it and at a seeded
model pair written for it.
"""

from __future__ import annotations

import os

import yaml

from wam_core.common.robot import TABLETOP_LIMITS, TABLETOP_URDF

NAMES = {
    'arm_joint_1': 'shoulder_pan',
    'arm_joint_2': 'shoulder_lift',
    'arm_joint_3': 'elbow',
    'arm_joint_4': 'wrist_lift',
    'arm_joint_5': 'wrist_twist',
    'arm_joint_6': 'wrist_roll',
    'gripper_joint': 'finger',
}
JOINTS = list(NAMES.values())


def write_description(out: str) -> str:
    """second_arm.urdf and joint_limits.yaml under ``out``; the URDF's path."""
    os.makedirs(out, exist_ok=True)
    with open(TABLETOP_URDF, encoding='utf-8') as fh:
        text = fh.read()
    text = text.replace('<robot name="tabletop_arm">', '<robot name="second_arm">')
    for old, new in NAMES.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    # the elbow turns less far and more slowly than the tabletop arm's
    text = text.replace(
        '<joint name="elbow" type="revolute">\n'
        '    <parent link="link2"/><child link="link3"/>\n'
        '    <origin xyz="0.3 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>\n'
        '    <limit lower="-2.9" upper="2.9" velocity="1.5" effort="50"/>',
        '<joint name="elbow" type="revolute">\n'
        '    <parent link="link2"/><child link="link3"/>\n'
        '    <origin xyz="0.3 0 0" rpy="0 0 0"/><axis xyz="0 1 0"/>\n'
        '    <limit lower="-2.5" upper="2.5" velocity="1.2" effort="50"/>',
    )
    assert 'velocity="1.2"' in text and 'arm_joint' not in text
    urdf = os.path.join(out, 'second_arm.urdf')
    with open(urdf, 'w', encoding='utf-8') as fh:
        fh.write(text)
    with open(TABLETOP_LIMITS, encoding='utf-8') as fh:
        limits = yaml.safe_load(fh)
    renamed = {'joint_limits': {NAMES[k]: v for k, v in limits['joint_limits'].items()}}
    with open(os.path.join(out, 'joint_limits.yaml'), 'w', encoding='utf-8') as fh:
        yaml.safe_dump(renamed, fh)
    return urdf


def write_overlay(path: str, urdf: str, world_dir: str = '', action_dir: str = '') -> str:
    """A parameter file after config/wam.yaml: the second arm's joints and description
    (no joint_limits: they come from its URDF), and the models to serve."""
    robot = {'joint_names': JOINTS, 'description_file': urdf}
    doc = {'/**': {'ros__parameters': {'robot': robot}}}
    if world_dir:
        doc['/**/world_expert'] = {'ros__parameters': {'model_dir': world_dir}}
    if action_dir:
        doc['/**/action_expert'] = {'ros__parameters': {'model_dir': action_dir}}
    with open(path, 'w', encoding='utf-8') as fh:
        yaml.safe_dump(doc, fh)
    return path
