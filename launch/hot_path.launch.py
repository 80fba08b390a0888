"""ros2 launch for the whole stack on a full ROS 2 install (launch_ros is not on PyPI).

    ros2 launch launch/hot_path.launch.py [robot:=sim|synthetic|none] [config:=config/wam.yaml]
        [release:=NAME]

Each expert runs in its own process and shares representations through the POSIX
shared-memory cache; the harness (the clamping gate and safety stop) and the task
manager (the planner) run in processes of their own. The expert nodes are managed
nodes: launch_ros emits the configure and activate transitions once each node is up
(what nav2's lifecycle_manager does), so ``ros2 lifecycle get /world_expert`` reads
"active" when it is serving. On this machine use ``make demo`` / ``make demo-multi`` instead.
"""

import os

import launch.actions
import launch.substitutions
import launch_ros.actions
from launch.conditions import LaunchConfigurationEquals

import launch
from wam_core.common.check_config import require_consistent
from wam_util.launching import managed_node

HERE = os.path.dirname(os.path.abspath(__file__))


def _check_config(context):
    """The rules across nodes (wam_core.common.check_config), before anything starts."""
    require_consistent([launch.substitutions.LaunchConfiguration('config').perform(context)])
    return []


def _experts(context):
    """The two experts, on the config's model pair or a registered release's."""
    config = launch.substitutions.LaunchConfiguration('config').perform(context)
    layers = [config]
    release = launch.substitutions.LaunchConfiguration('release').perform(context)
    if release:
        from robot_agent.releases import overlay_for_config

        layers.append(overlay_for_config(release, config))
    # launch drives the lifecycle transitions, so the nodes must not self-activate
    shm = {'repr_cache.backend': 'shm', 'autostart': False}
    actions = managed_node('world_expert_node', 'world_expert', 'world_expert', [*layers, shm])
    actions += managed_node('action_expert_node', 'action_expert', 'action_expert', [*layers, shm])
    return actions


def generate_launch_description():
    config = launch.substitutions.LaunchConfiguration('config')
    actions = [
        launch.actions.DeclareLaunchArgument(
            'config',
            default_value=os.path.join(HERE, '..', 'config', 'wam.yaml'),
            description='stack parameter file',
        ),
        launch.actions.DeclareLaunchArgument(
            'robot',
            default_value='sim',
            choices=['sim', 'synthetic', 'none'],
            description='the MuJoCo tabletop (with the agent), the synthetic source, '
            "or 'none' for a real robot",
        ),
        launch.actions.DeclareLaunchArgument(
            'release',
            default_value='',
            description='a registered model release to serve (python -m robot_agent.releases '
            "list); empty: the config's model_dir pair",
        ),
        launch.actions.OpaqueFunction(function=_check_config),
        launch.actions.SetEnvironmentVariable('OMP_NUM_THREADS', '1'),
        # relative model paths in the config resolve against the repository root
        launch.actions.SetEnvironmentVariable(
            'WAM_ROOT', os.path.normpath(os.path.join(HERE, '..'))
        ),
    ]
    actions.append(launch.actions.OpaqueFunction(function=_experts))
    # the gate and the planner in separate processes: nothing the task manager does (an
    # LLM call, MiniLM, a native crash) can stall or end the only road to the robot
    for executable in ('harness', 'task_manager'):
        actions.append(
            launch_ros.actions.Node(
                package='harness_node',
                executable=executable,
                name=executable,
                output='screen',
                parameters=[config],
            )
        )
    actions.append(
        launch_ros.actions.Node(
            package='robot_agent',
            executable='synthetic_robot',
            name='synthetic_robot',
            output='screen',
            parameters=[config],
            condition=LaunchConfigurationEquals('robot', 'synthetic'),
        )
    )
    for executable in ('sim_robot', 'agent'):
        actions.append(
            launch_ros.actions.Node(
                package='robot_agent',
                executable=executable,
                name='robot_agent' if executable == 'agent' else executable,
                output='screen',
                parameters=[config],
                condition=LaunchConfigurationEquals('robot', 'sim'),
            )
        )
    return launch.LaunchDescription(actions)
