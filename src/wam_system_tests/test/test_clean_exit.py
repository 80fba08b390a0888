"""Ctrl-C ends every node process cleanly: exit code 0, no "process has died".

Under ``ros2 launch`` a Ctrl-C reaches each node twice: the terminal's SIGINT to the
process group, then launch's own. Each node process here gets two SIGINTs 50 ms apart
once it is up, and must exit 0; the action expert must first brake its robot to a hold
(the last message on its raw_chunk topic is a one-point trajectory), as a deactivation
does.
"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import rclpy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from wam_core.common.paths import default_config
from wam_core.common.robot import TABLETOP_ARM
from wam_util import qos

NODES = {
    'world_expert_node.node': 'world_expert',
    'action_expert_node.node': 'action_expert',
    'action_expert_node.instance': 'action_instance',
    'harness_node.node': 'harness',
    'harness_node.task_node': 'task_manager',
    'harness_node.task_managers': 'task_managers',
    'robot_agent.synthetic_robot': 'synthetic_robot',
}


@pytest.fixture
def probe():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    rclpy.init()
    node = rclpy.create_node('exit_probe')
    yield node
    node.destroy_node()
    rclpy.try_shutdown()


def _spin_until(node, cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end and not cond():
        rclpy.spin_once(node, timeout_sec=0.02)
    return cond()


@pytest.mark.parametrize('module', sorted(NODES))
def test_two_sigints_end_the_node_with_exit_code_zero(probe, module):
    name = NODES[module]
    js = probe.create_publisher(JointState, '/joint_states', qos.SENSOR)
    chunks: list[tuple[float, JointTrajectory]] = []
    probe.create_subscription(
        JointTrajectory,
        '/action_expert/raw_chunk',
        lambda m: chunks.append((time.monotonic(), m)),
        100,
    )
    args = ['--params-file', default_config()]
    if name in ('world_expert', 'action_expert', 'action_instance'):  # a shm cache
        args += ['-p', 'repr_cache.backend:=shm', '-p', f'repr_cache.shm_name:=exit_{os.getpid()}']
    if name == 'action_instance':  # one robot: its node is /robot1/action_expert
        args += ['-p', 'action_instance:robots:=[robot1]']
    if name == 'task_managers':  # one robot: its node is /robot1/task_manager
        args += ['-p', 'task_managers:robots:=[robot1]']
    proc = subprocess.Popen(
        [sys.executable, '-m', module, '--ros-args', *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        names = list(TABLETOP_ARM.joint_names)
        home = [0.0, -0.6, 1.2, -0.6, 0.0, 0.0, 0.04]

        def up():
            js.publish(JointState(name=names, position=home))
            return name in probe.get_node_names()

        assert _spin_until(probe, up, 60.0), f'{name} did not come up'
        if name == 'action_expert':  # serving: its ticks publish (holds: no world expert)
            assert _spin_until(probe, lambda: up() and len(chunks) > 10, 60.0), 'no ticks'
        else:
            _spin_until(probe, lambda: up() and False, 2.0)  # a few joint states in
        t_sigint = time.monotonic()
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=30)
        out = proc.stdout.read().decode(errors='replace')
        assert rc == 0, f'{name} exited with {rc}: {out[-1500:]}'
        if name == 'action_expert':
            _spin_until(probe, lambda: any(t >= t_sigint for t, _ in chunks), 2.0)
            after = [m for t, m in chunks if t >= t_sigint]
            # the last thing the robot got is a braking hold (with no world expert every
            # tick holds too: this checks that nothing else went out after them)
            assert after and len(after[-1].points) == 1, 'no braking hold on the way out'
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
