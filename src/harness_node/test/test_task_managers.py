"""Several robots' task managers in one process (harness_node.task_managers): each robot
its own node, plans and subtasks under its namespace, one MiniLM shared."""

import os
import random
import time

import pytest
import rclpy
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String

from harness_node.task_managers import TaskManagerHost
from wam_core.common.params import ConfigError
from wam_interfaces.action import ExecuteTask
from wam_interfaces.msg import ActiveSubtask
from wam_util.executors import make_executor, spin_slice

ROBOTS = ['robot1', 'robot2']


def _init(*params: str) -> None:
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    args = ['--ros-args']
    for p in params:
        args += ['-p', p]
    rclpy.init(args=args)


@pytest.fixture
def host():
    # every node of the process gets these (as a fleet's parameter files give them)
    robots = f'robots:=[{",".join(ROBOTS)}]'
    _init(robots, 'planner.use_llm:=false', 'task.subtask_duration_s:=0.05')
    h = TaskManagerHost()
    managers = h.bring_up()
    probe = rclpy.create_node('probe')
    seen = {r: [] for r in ROBOTS}
    latched = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    for r in ROBOTS:
        probe.create_subscription(
            ActiveSubtask, f'/{r}/harness/active_subtask', seen[r].append, latched
        )
    clients = {r: ActionClient(probe, ExecuteTask, f'/{r}/harness/execute_task') for r in ROBOTS}
    ex = make_executor()
    for n in (h, *managers, probe):
        ex.add_node(n)
    rig = type('Rig', (), {})()
    rig.host, rig.managers, rig.seen, rig.clients, rig.ex = h, managers, seen, clients, ex
    yield rig
    ex.shutdown()
    for n in (*managers, probe, h):
        n.destroy_node()
    rclpy.try_shutdown()


def spin_until(rig, pred, timeout):
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        spin_slice(rig.ex, 0.02)
    return pred()


def send(rig, robot, text):
    client = rig.clients[robot]
    assert spin_until(rig, client.server_is_ready, 10)
    fut = client.send_goal_async(ExecuteTask.Goal(instruction=text))
    assert spin_until(rig, fut.done, 10) and fut.result().accepted


def test_each_robot_plans_under_its_own_namespace_with_one_shared_minilm(host):
    names = sorted(n.get_fully_qualified_name() for n in host.managers)
    assert names == ['/robot1/task_manager', '/robot2/task_manager']
    one, two = (host.host.managers[r].tasks for r in ROBOTS)
    assert one.embedder is two.embedder  # loaded once for the process
    assert one.planner is not two.planner  # a robot's slow LLM call never queues another's

    text = 'put the red apple in the fridge'
    send(host, 'robot1', text)
    assert spin_until(host, lambda: len(host.seen['robot1']) >= 6, 20)
    spin_until(host, lambda: False, 0.3)
    assert host.seen['robot2'] == []  # robot1's task never reaches robot2
    assert (one.embedding_model_calls, one.embedding_hits) == (6, 0)

    # robot2 gets the same task: its embeddings come from the process's cache, and its
    # own status counts them as its hits
    send(host, 'robot2', text)
    assert spin_until(host, lambda: len(host.seen['robot2']) >= 6, 20)
    assert (two.embedding_model_calls, two.embedding_hits) == (0, 6)
    assert one.embedder.model_calls == 6
    assert host.seen['robot2'][-1].subtask.text == 'release the red apple'
    assert two._status().embedding_cache_hits == 6
    assert one._status().embedding_model_calls == 6


def test_an_instruction_topic_tasks_its_own_robot_only(host):
    probe = rclpy.create_node('instruction_probe')
    host.ex.add_node(probe)
    pub = probe.create_publisher(String, '/robot2/instruction', 10)
    try:
        assert spin_until(host, lambda: pub.get_subscription_count() == 1, 10)
        pub.publish(String(data='pick up the red apple'))
        assert spin_until(host, lambda: len(host.seen['robot2']) >= 1, 20)
        spin_until(host, lambda: False, 0.3)
        assert host.seen['robot1'] == []
    finally:
        host.ex.remove_node(probe)
        probe.destroy_node()


@pytest.mark.parametrize('robots', ['[]', '[robot1,robot1]'])
def test_a_host_without_robots_or_with_a_robot_twice_is_refused(robots):
    _init(f'robots:={robots}')
    try:
        with pytest.raises(ConfigError, match='robots'):
            TaskManagerHost()
    finally:
        rclpy.try_shutdown()
