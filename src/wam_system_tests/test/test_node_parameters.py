"""Each node declares exactly its schema's parameters, each with a descriptor that
``ros2 param describe`` would show, and a bad value fails with the parameter named."""

import os
import random

import pytest
import rclpy
from rcl_interfaces.msg import ParameterType
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter

from action_expert_node.instance import ActionInstance
from action_expert_node.node import ActionExpertNode
from harness_node.node import HarnessNode
from harness_node.task_managers import TaskManagerHost
from harness_node.task_node import TaskManagerNode
from robot_agent.agent_node import AgentNode
from robot_agent.sim_robot import SimRobot
from robot_agent.synthetic_robot import SyntheticRobot
from wam_core.common.config import NODE_SCHEMAS
from wam_core.common.params import ConfigError, leaves
from world_expert_node.node import WorldExpertNode

NODES = {
    'world_expert': WorldExpertNode,
    'action_expert': ActionExpertNode,
    # (its robots have no default: an instance serves the robots it is given)
    'action_instance': lambda: ActionInstance(
        parameter_overrides=[Parameter('robots', value=['robot1'])]
    ),
    'harness': HarnessNode,
    'task_manager': TaskManagerNode,
    'task_managers': lambda: TaskManagerHost(
        parameter_overrides=[Parameter('robots', value=['robot1'])]
    ),
    'sim_robot': SimRobot,
    'synthetic_robot': SyntheticRobot,
    'robot_agent': AgentNode,
}
# declared by rclpy itself on every node (and by diagnostic_updater on a full install)
BUILT_IN = {'use_sim_time', 'start_type_description_service', 'diagnostic_updater.period'}
NUMBERS = {ParameterType.PARAMETER_INTEGER, ParameterType.PARAMETER_DOUBLE}


@pytest.fixture
def ros():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    yield
    rclpy.try_shutdown()


@pytest.mark.parametrize('name', sorted(NODES))
def test_each_node_declares_its_schema_with_descriptions(ros, name):
    node = NODES[name]()
    try:
        declared = set(node.list_parameters([], 0).names) - BUILT_IN
        schema = {leaf.name: leaf for leaf in leaves(NODE_SCHEMAS[name])}
        assert declared == set(schema)
        for d in node.describe_parameters(sorted(declared)):
            leaf = schema[d.name]
            assert d.description == leaf.spec.description and len(d.description) > 10, d.name
            if d.type in NUMBERS:
                ranges = d.floating_point_range or d.integer_range
                assert ranges and ranges[0].from_value == leaf.spec.min, d.name
            if leaf.spec.choices:
                assert all(c in d.additional_constraints for c in leaf.spec.choices), d.name
    finally:
        node.destroy_node()


def test_a_mistyped_or_out_of_range_value_fails_configure_naming_the_parameter(ros):
    node = WorldExpertNode(
        parameter_overrides=[
            Parameter('repr_cache.ttl_ms', value=50),  # an int where a float is declared
            Parameter('warmup_requests', value=-3),  # below its range
        ]
    )
    try:
        with pytest.raises(ConfigError, match='repr_cache.ttl_ms') as exc:
            node.params.read()
        assert 'warmup_requests' in str(exc.value)
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    finally:
        node.destroy_node()
    node = ActionExpertNode(parameter_overrides=[Parameter('degrade_on_timeout', value='crash')])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        with pytest.raises(ConfigError, match='degrade_on_timeout must be one of'):
            node.params.read()
    finally:
        node.destroy_node()
    with pytest.raises(ConfigError, match='safety.chunk_timeout_s'):
        HarnessNode(parameter_overrides=[Parameter('safety.chunk_timeout_s', value=-1.0)])


def test_a_parameter_no_node_has_fails_configure_naming_it(ros):
    """A typo in a parameter file or on the command line is refused at run time as the
    schema check refuses it without ROS (issue 24, item 4: rclpy ignored it silently)."""
    ok = [Parameter('repr_cache.backend', value='shm')]  # configures without a writer
    node = ActionExpertNode(parameter_overrides=ok)
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    finally:
        node.destroy_node()
    node = ActionExpertNode(parameter_overrides=[*ok, Parameter('timout_ms', value=10.0)])
    try:
        assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
        with pytest.raises(ConfigError, match='parameter timout_ms: no node of the stack has it'):
            node.params.read()
    finally:
        node.destroy_node()
    # a name another node declares is meant for that node (a /** block reaches every node)
    node = ActionExpertNode(parameter_overrides=[Parameter('safety.chunk_hold_s', value=0.2)])
    try:
        node.params.read()
    finally:
        node.destroy_node()
    with pytest.raises(ConfigError, match='parameter planner.llm_urll'):
        TaskManagerNode(parameter_overrides=[Parameter('planner.llm_urll', value='http://x')])
