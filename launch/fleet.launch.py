"""ros2 launch for a fleet on a full ROS 2 install (launch_ros is not on PyPI).

    ros2 launch launch/fleet.launch.py [robots:=2] [robot:=sim|synthetic|none]
        [cache:=shm|mooncake] [world_host:=127.0.0.2] [robot_host:=127.0.0.3]
        [config:=config/wam.yaml] [release:=NAME] [instances:=0]

One world expert in the root namespace serves robot1..robotN; each robot gets, under
/robot<k>/, an action expert, a harness (clamping gate, safety stop; a process per
robot), a task manager (every robot's in one ``task_managers`` process) and, with
robot:=sim, a simulated tabletop (seed k-1) and its agent. config/fleet.yaml is layered
over the parameter file (a robot's gate depends on its own action expert and the
shared /world_expert). With cache:=mooncake the Mooncake Store's master is started on
world_host first (with its HTTP metadata server) and the experts exchange
representations through it: the world expert's transfer endpoint on world_host, the
action experts' on robot_host; the descriptors still travel over DDS. The expert nodes
are managed nodes driven to active by launch. With instances:=K (1 <= K <= robots) the
robots' action experts run in K action_instance processes instead of one process each
(``wam_core.serving.failover.ring_layout``: contiguous blocks, each instance the
standby of the next one's robots); an instance brings its robots' nodes up itself. On
this machine use ``make demo-fleet ROBOTS=N`` instead.
"""

import os
import tempfile

import launch.actions
import launch.substitutions
import launch_ros.actions
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PythonExpression

import launch
from robot_agent.fleet import write_instance_params, write_task_managers_params
from wam_core.common.check_config import require_consistent
from wam_core.serving.failover import ring_layout
from wam_util.launching import managed_node

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..'))
MASTER_RPC_PORT, MASTER_HTTP_PORT = 50051, 8080


def _fleet(context):
    n = int(LaunchConfiguration('robots').perform(context))
    if n < 1:
        raise RuntimeError(f'robots:={n}: a fleet has at least one robot')
    robot = LaunchConfiguration('robot').perform(context)
    cache = LaunchConfiguration('cache').perform(context)
    world_host = LaunchConfiguration('world_host').perform(context)
    robot_host = LaunchConfiguration('robot_host').perform(context)
    config = LaunchConfiguration('config').perform(context)
    layers = [config, os.path.join(ROOT, 'config', 'fleet.yaml')]
    release = LaunchConfiguration('release').perform(context)
    if release:  # a registered release's pair instead of the config's model_dir
        from robot_agent.releases import overlay_for_config

        layers.append(overlay_for_config(release, config))
    require_consistent(layers)  # the rules across nodes, before anything starts
    names = [f'robot{k + 1}' for k in range(n)]
    instances = int(LaunchConfiguration('instances').perform(context))
    layout = ring_layout(names, instances) if instances else []
    params_dir = tempfile.mkdtemp(prefix='wam_launch_')
    # launch drives the lifecycle transitions, so the nodes must not self-activate
    cache_params = {'repr_cache.backend': cache, 'autostart': False}
    if cache == 'mooncake':
        cache_params.update(
            {
                'repr_cache.mooncake.master_address': f'{world_host}:{MASTER_RPC_PORT}',
                'repr_cache.mooncake.metadata_server': (
                    f'http://{world_host}:{MASTER_HTTP_PORT}/metadata'
                ),
                'repr_cache.mooncake.local_hostname': world_host,
                'repr_cache.mooncake.reader_hostname': robot_host,
            }
        )
    actions = managed_node(
        'world_expert_node',
        'world_expert',
        'world_expert',
        [*layers, cache_params, {'robots': names}],
    )
    for plan in layout:
        actions.append(
            launch_ros.actions.Node(
                package='action_expert_node',
                executable='action_instance',
                # not name=/namespace=: launch_ros passes them as process-wide remaps,
                # which would rename the robots' nodes the instance hosts too
                ros_arguments=['-r', f'action_instance:__ns:=/{plan.name}'],
                output='screen',
                # the layout in a file after wam.yaml (a dict would land under /**, which
                # rcl applies before wam.yaml's own action_instance block)
                parameters=[*layers, cache_params, write_instance_params(plan, params_dir)],
            )
        )
    # the robots' task managers (the planners) in one process, each its own
    # /<robot>/task_manager node; not name=/namespace= (process-wide remaps)
    actions.append(
        launch_ros.actions.Node(
            package='harness_node',
            executable='task_managers',
            output='screen',
            parameters=[*layers, write_task_managers_params(names, params_dir)],
        )
    )
    for k, name in enumerate(names):
        ns = name
        if not layout:
            actions += managed_node(
                'action_expert_node',
                'action_expert',
                'action_expert',
                [*layers, cache_params],
                ns,
            )
        actions.append(  # the gate, a process per robot
            launch_ros.actions.Node(
                package='harness_node',
                executable='harness',
                name='harness',
                namespace=ns,
                output='screen',
                parameters=layers,
            )
        )
        source = {'sim': 'sim_robot', 'synthetic': 'synthetic_robot'}.get(robot)
        if source is not None:
            actions.append(
                launch_ros.actions.Node(
                    package='robot_agent',
                    executable=source,
                    name=source,
                    namespace=ns,
                    output='screen',
                    parameters=[*layers, {'seed': k}],
                )
            )
        if robot == 'sim':
            actions.append(
                launch_ros.actions.Node(
                    package='robot_agent',
                    executable='agent',
                    name='robot_agent',
                    namespace=ns,
                    output='screen',
                    parameters=layers,
                )
            )
    return actions


def generate_launch_description():
    cache = LaunchConfiguration('cache')
    mooncake = IfCondition(PythonExpression(["'", cache, "' == 'mooncake'"]))
    return launch.LaunchDescription(
        [
            launch.actions.DeclareLaunchArgument(
                'robots', default_value='2', description='robots in the fleet (robot1..robotN)'
            ),
            launch.actions.DeclareLaunchArgument(
                'robot',
                default_value='sim',
                choices=['sim', 'synthetic', 'none'],
                description='per robot: the MuJoCo tabletop with its agent, the synthetic '
                "source, or 'none' for real robots under /robot<k>/",
            ),
            launch.actions.DeclareLaunchArgument(
                'cache',
                default_value='shm',
                choices=['shm', 'mooncake'],
                description='representations through shared memory (one host) or the '
                'Mooncake Store (across hosts)',
            ),
            launch.actions.DeclareLaunchArgument(
                'world_host',
                default_value='127.0.0.2',
                description="the world expert's host address (the store's master runs there)",
            ),
            launch.actions.DeclareLaunchArgument(
                'robot_host',
                default_value='127.0.0.3',
                description="the action experts' host address (their store endpoint)",
            ),
            launch.actions.DeclareLaunchArgument(
                'config',
                default_value=os.path.join(ROOT, 'config', 'wam.yaml'),
                description='stack parameter file (config/fleet.yaml is layered over it)',
            ),
            launch.actions.DeclareLaunchArgument(
                'release',
                default_value='',
                description='a registered model release to serve (python -m '
                "robot_agent.releases list); empty: the config's model_dir pair",
            ),
            launch.actions.DeclareLaunchArgument(
                'instances',
                default_value='0',
                description="K >= 1: the robots' action experts in K processes, one clock and "
                "one model each, each the standby of the next one's robots; 0: one per robot",
            ),
            launch.actions.SetEnvironmentVariable('OMP_NUM_THREADS', '1'),
            launch.actions.SetEnvironmentVariable('WAM_ROOT', ROOT),
            # the store's master first, with a readiness check, when representations
            # cross hosts (wam_core.cache.mooncake_master prints "ready" once it answers)
            launch.actions.ExecuteProcess(
                cmd=[
                    'python3',
                    '-m',
                    'wam_core.cache.mooncake_master',
                    '--host',
                    LaunchConfiguration('world_host'),
                    '--rpc-port',
                    str(MASTER_RPC_PORT),
                    '--http-port',
                    str(MASTER_HTTP_PORT),
                ],
                name='mooncake_master',
                output='screen',
                condition=mooncake,
            ),
            launch.actions.OpaqueFunction(function=_fleet),
        ]
    )
