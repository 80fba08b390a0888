"""The gate keeps the robot served whatever happens to the planner (issue 24, item 1).

The multi-process stack on the synthetic robot: the process that serves ExecuteTask
(found through the ROS graph, whichever node that is) is frozen with SIGSTOP, as a
long GIL hold or a hung native call would freeze it, then killed, as a native crash in
torch would end it. Chunks must keep reaching /arm_controller/joint_trajectory at the
control rate throughout, with no safety stop. When the planner shared the gate's process
(9138be4), freezing it froze the gate: nothing was forwarded.
"""

import os
import random
import signal

from rclpy.action import get_action_server_names_and_types_by_node

from robot_agent.stack import Stack
from wam_core.common.paths import default_config

# the node that serves ExecuteTask -> the module its process runs
NODE_MODULES = {'harness': 'harness_node.node', 'task_manager': 'harness_node.task_node'}


def _planner_role(stack: Stack) -> str:
    """The stack's child whose process serves harness/execute_task."""

    def serving():
        for name, ns in stack.monitor.get_node_names_and_namespaces():
            actions = get_action_server_names_and_types_by_node(stack.monitor, name, ns)
            if any(a == '/harness/execute_task' for a, _ in actions):
                return name
        return None

    stack.spin_for(10.0, until=lambda: serving() is not None)
    name = serving()
    assert name in NODE_MODULES, f'ExecuteTask served by {name!r}'
    roles = [r for r, m in Stack.CHILDREN.items() if m == NODE_MODULES[name]]
    assert len(roles) == 1, roles
    return roles[0]


def _forwarded_over(stack: Stack, seconds: float) -> int:
    before = stack.monitor.forwarded
    stack.spin_for(seconds)
    return stack.monitor.forwarded - before


def test_a_frozen_or_crashed_planner_does_not_stall_the_gate():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    stack = Stack('multi', default_config(), robot='synthetic')
    frozen = None
    try:
        stack.wait_ready(120)
        stack.spin_for(15.0, until=lambda: not stack.monitor.safety_stop)
        assert not stack.monitor.safety_stop
        role = _planner_role(stack)
        # 50 Hz: ~150 chunks in 3 s; half of that is a gate that kept serving on a busy
        # two-core machine, and a gate frozen with the planner forwards none
        assert _forwarded_over(stack, 3.0) > 75  # the baseline, with the planner alive
        frozen = stack.children[role]
        frozen.send_signal(signal.SIGSTOP)
        served = _forwarded_over(stack, 3.0)
        stopped = stack.monitor.safety_stop
        frozen.send_signal(signal.SIGCONT)
        assert served > 75 and not stopped, (role, served, stopped)
        stack.kill_child(role, signal.SIGKILL)  # a native crash
        frozen = None
        served = _forwarded_over(stack, 3.0)
        assert served > 75 and not stack.monitor.safety_stop, (role, served)
    finally:
        if frozen is not None:
            frozen.send_signal(signal.SIGCONT)
        stack.shutdown()
