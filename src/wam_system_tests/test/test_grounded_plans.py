"""Grounded plans through the stack: the agent's PERCEIVE step reports what the
simulated robot sees, and the harness refuses a plan naming anything else, with the
reason in the ExecuteTask result (and so in the agent's log) and counted."""

import os
import random

from robot_agent.stack import Stack, override
from wam_core.common.paths import default_config

CONFIG = default_config()


def test_a_plan_naming_an_object_not_in_view_is_refused_with_what_the_robot_sees():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    args = override('robot_agent', 'instruction', 'put the green banana in the fridge')
    args += override('robot_agent', 'max_attempts', 1)
    args += override('robot_agent', 'observe_s', 0.2)
    stack = Stack('single', CONFIG, robot='sim', agent=True, extra_args=args)
    try:
        stack.wait_ready(60)
        agent = stack.agent.agent
        stack.spin_for(30.0, until=lambda: agent.state in ('DONE', 'ABORTED'))
        reasons = [why for _, _, _, why in agent.transitions]
        failed = [r for r in reasons if r.startswith('execution failed')]
        assert failed, reasons
        assert 'no green banana in view; I see: red apple, fridge' in failed[0], failed
        assert agent.state == 'ABORTED'
        # the task manager's status comes once a second: wait for the one after the refusal
        stack.spin_for(
            5.0, until=lambda: stack.monitor.task is not None and stack.monitor.task.plans_refused
        )
        task = stack.monitor.task
        assert {r.reason: r.count for r in task.plans_refused} == {'not_in_view': 1}
        assert {'red apple', 'fridge'} <= set(task.perceived)
    finally:
        stack.shutdown()
