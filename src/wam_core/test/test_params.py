"""Parameter schemas: config/wam.yaml against the schemas, and how values are checked."""

import os

import pytest

from wam_core.common.config import (
    NODE_SCHEMAS,
    ActionExpertParams,
    HarnessParams,
    WorldExpertParams,
)
from wam_core.common.params import (
    WILDCARDS,
    ConfigError,
    from_flat,
    leaves,
    load_params,
    read_param_file,
    to_flat,
)
from wam_core.common.paths import default_config
from wam_core.common.robot import TABLETOP_ARM

CONFIG = default_config()


def test_the_yaml_has_one_block_per_node_and_a_shared_block():
    blocks = read_param_file(CONFIG)
    # /**/<node>: the block reaches the node in any robot namespace of a fleet
    assert set(blocks) == {'/**', *(f'/**/{n}' for n in NODE_SCHEMAS)}
    # shared: only what several nodes use
    shared = {k for k in blocks['/**'] if not k.startswith('joint_limits.')}
    assert shared == {
        'robot.joint_names',
        'robot.description_file',
        'control.period_s',
        'control.max_command_deviation',
        'control.contact_noise_fraction',
        'repr_cache.backend',
        'repr_cache.ttl_ms',
        'repr_cache.shm_name',
        'repr_cache.cuda_device',
        *(
            f'repr_cache.mooncake.{k}'
            for k in (
                'master_address',
                'metadata_server',
                'local_hostname',
                'reader_hostname',
                'protocol',
                'device_name',
                'global_segment_mb',
                'local_buffer_mb',
                'objects_per_robot',
                'connect_timeout_s',
            )
        ),
    }
    # the joint limits: every field of every joint (the gate and the action expert use them)
    assert {k for k in blocks['/**'] if k.startswith('joint_limits.')} == {
        f'joint_limits.{j}.{f}'
        for j in TABLETOP_ARM.joint_names
        for f in ('lower', 'upper', 'velocity', 'effort', 'acceleration')
    }
    for key in blocks['/**']:
        users = [n for n, s in NODE_SCHEMAS.items() if key in {leaf.name for leaf in leaves(s)}]
        assert len(users) >= 2, (key, users)


@pytest.mark.parametrize('node', sorted(NODE_SCHEMAS))
def test_every_parameter_is_in_the_yaml_and_the_code_defaults_are_its_values(node):
    schema = NODE_SCHEMAS[node]
    blocks = read_param_file(CONFIG)
    own = blocks[f'/**/{node}']
    in_yaml = set(own) | set(blocks['/**'])
    declared = {leaf.name for leaf in leaves(schema)}
    assert declared - in_yaml == set(), 'parameters the code reads but wam.yaml lacks'
    assert set(own) - declared == set(), 'wam.yaml keys the node does not declare'
    assert load_params(CONFIG, node, schema) == schema(), 'a code default differs from wam.yaml'


def test_every_parameter_has_a_description_and_numbers_a_range():
    for node, schema in NODE_SCHEMAS.items():
        for leaf in leaves(schema):
            assert len(leaf.spec.description) > 10, (node, leaf.name)
            if leaf.kind in (int, float):
                assert leaf.spec.min is not None and leaf.spec.max is not None, leaf.name


def test_joint_limits_expand_over_the_robots_joints():
    names = {leaf.name for leaf in leaves(HarnessParams)}
    assert 'joint_limits.gripper_joint.velocity' in names
    assert dict(HarnessParams().joint_limits) == dict(TABLETOP_ARM.limits)
    # the joints are the robot description's: others are refused (another arm is another
    # URDF, robot.description_file, whose limits are then the defaults: test_second_arm)
    flat = {'robot.joint_names': ['a', 'b']}
    for j in 'ab':
        flat.update(
            {
                f'joint_limits.{j}.lower': -1.0,
                f'joint_limits.{j}.upper': 1.0,
                f'joint_limits.{j}.velocity': 2.0,
            }
        )
    with pytest.raises(ConfigError, match=r"\['a', 'b'\] are not the commanded joints"):
        from_flat(HarnessParams, flat)
    # narrower than the URDF: fine; wider: refused, naming the joint
    narrow = {'joint_limits.arm_joint_2.velocity': 1.0}
    assert from_flat(HarnessParams, narrow).joint_limits['arm_joint_2'].velocity == 1.0
    with pytest.raises(ConfigError, match='joint_limits.arm_joint_2: upper wider than the URDF'):
        from_flat(HarnessParams, {'joint_limits.arm_joint_2.upper': 3.5})


def test_flat_round_trip():
    for schema in NODE_SCHEMAS.values():
        assert from_flat(schema, to_flat(schema())) == schema()


@pytest.mark.parametrize(
    'schema,flat,match',
    [
        (WorldExpertParams, {'repr_cache.backend': 'redis'}, 'repr_cache.backend must be one of'),
        (WorldExpertParams, {'repr_cache.ttl_ms': -1.0}, r'repr_cache.ttl_ms must be in'),
        (WorldExpertParams, {'repr_cache.ttl_ms': 50}, "must be a float .* or 'auto'"),
        (WorldExpertParams, {'repr_cache.ttl_ms': 'automatic'}, 'ttl_ms must be a float'),
        (WorldExpertParams, {'repr_cache.capacity': 'many'}, 'repr_cache.capacity must be a int'),
        (WorldExpertParams, {'precision': 'int3'}, 'precision must be one of'),
        (WorldExpertParams, {'precision': 'int8', 'device': 'cuda'}, 'int8 runs on the CPU'),
        (ActionExpertParams, {'precision': 'int8'}, 'precision must be one of'),
        (WorldExpertParams, {'repr_cache.shm_name': 'a/b'}, 'shm_name must be a plain name'),
        (ActionExpertParams, {'control.period_s': 5.0}, 'control.period_s must be in'),
        (WorldExpertParams, {'robot.joint_names': ['a', 'a']}, 'robot.joint_names must be'),
        (ActionExpertParams, {'autostart': 1}, 'autostart must be a bool'),
        (HarnessParams, {'joint_limits.arm_joint_1.upper': -5.0}, "joint 'arm_joint_1'"),
        (HarnessParams, {'safety.required_nodes': 'world_expert'}, 'a list of strings'),
    ],
)
def test_bad_values_are_refused_with_the_parameter_named(schema, flat, match):
    with pytest.raises(ConfigError, match=match):
        from_flat(schema, flat)


def test_a_typo_in_a_node_block_is_an_error_and_shared_keys_are_optional(tmp_path):
    f = tmp_path / 'p.yaml'
    f.write_text(
        '/**:\n  ros__parameters:\n    control: {period_s: 0.01}\n'
        'world_expert:\n  ros__parameters:\n    warmup_request: 3\n'
    )
    with pytest.raises(ConfigError, match='world_expert has no parameter.*warmup_request'):
        load_params(str(f), 'world_expert', WorldExpertParams)
    f.write_text(
        '/**:\n  ros__parameters:\n    control: {period_s: 0.01}\n'
        '/world_expert:\n  ros__parameters:\n    warmup_requests: 3\n'
    )
    assert load_params(str(f), 'world_expert', WorldExpertParams).warmup_requests == 3
    assert load_params(str(f), 'action_expert', ActionExpertParams).control.period_s == 0.01
    assert '/**' in WILDCARDS


def test_relative_paths_need_the_workspace_root(monkeypatch):
    from wam_core.common.paths import resolve_path

    assert resolve_path('/abs/x') == '/abs/x'
    monkeypatch.setenv('WAM_ROOT', '/ws')
    assert resolve_path('models/w') == os.path.normpath('/ws/models/w')
    monkeypatch.delenv('WAM_ROOT')
    with pytest.raises(ConfigError, match='WAM_ROOT is not set'):
        resolve_path('models/w')


def test_rules_across_nodes_are_checked_where_both_values_are_known(tmp_path):
    """The harness's chunk_hold_s must exceed the action expert's open-loop budget; each
    node checks only its own parameters, so the parameter files are checked as a whole
    (issue 24, item 4)."""
    from wam_core.common.check_config import cross_node_problems, main, require_consistent

    assert cross_node_problems([default_config()]) == []
    bad = tmp_path / 'bad.yaml'
    bad.write_text(
        '/**/harness:\n  ros__parameters:\n    safety: {chunk_hold_s: 0.05}\n'
        '/**/action_expert:\n  ros__parameters:\n    repr_cache: {ttl_ms: 80.0}\n'
    )
    problems = cross_node_problems([default_config(), str(bad)])
    assert len(problems) == 2
    assert (
        'safety.chunk_hold_s (0.05 s) must exceed action_expert degrade.max_open_loop_s'
        in (problems[0])
    )
    assert "repr_cache.ttl_ms differs: world_expert 'auto', action_expert 80.0" in problems[1]
    with pytest.raises(ConfigError, match='chunk_hold_s'):
        require_consistent([default_config(), str(bad)])
    assert main([default_config(), str(bad)]) == 1 and main([default_config()]) == 0
    typo = tmp_path / 'typo.yaml'
    typo.write_text('/**/action_expert:\n  ros__parameters:\n    timout_ms: 10.0\n')
    (problem,) = cross_node_problems([default_config(), str(typo)])
    assert 'action_expert has no parameter(s) timout_ms' in problem
