from wam_core.agent.task_cycle import ABORTED, ACT, DONE, OBSERVE, PERCEIVE, PLAN, Agent
from wam_core.common.config import AgentParams


def test_happy_path_goes_through_every_state():
    a = Agent(AgentParams(observe_s=0.5))
    a.start('put the red apple in the fridge', 0.0)
    assert a.state == PERCEIVE and a.step(0.1) is None
    assert a.step(0.2, perception_ok=True) == 'send_goal' and a.state == PLAN
    a.step(0.3, goal_accepted=True)
    assert a.state == ACT and a.attempts == 1
    a.step(5.0, result=(True, 'done'))
    assert a.state == OBSERVE
    a.step(5.2, success=True)
    assert a.state == OBSERVE  # still settling
    a.step(5.6, success=True)
    assert a.state == DONE and a.finished == 5.6
    assert [t[2] for t in a.transitions] == [PERCEIVE, PLAN, ACT, OBSERVE, DONE]


def test_retry_then_abort_with_reasons():
    a = Agent(AgentParams(max_attempts=2, observe_s=0.0))
    a.start('x', 0.0)
    a.step(0.1, perception_ok=True)
    a.step(0.2, goal_accepted=True)
    a.step(1.0, result=(True, 'done'))
    assert a.step(1.1, success=False) == 'send_goal' and a.state == PLAN and 'retrying' in a.reason
    a.step(1.2, goal_accepted=True)
    a.step(2.0, result=(False, 'canceled'))
    a.step(2.1, success=False)
    assert a.state == ABORTED and 'after 2 attempts' in a.reason


def test_timeouts_abort():
    a = Agent(AgentParams(perceive_timeout_s=1.0))
    a.start('x', 0.0)
    a.step(2.0)
    assert a.state == ABORTED and 'perception' in a.reason
    b = Agent(AgentParams(plan_timeout_s=1.0, perceive_timeout_s=5.0))
    b.start('x', 0.0)
    b.step(0.1, perception_ok=True)
    b.step(1.5)
    assert b.state == PLAN  # no harness server yet: the plan timeout has not started
    b.step(2.0, goal_sent=True)
    b.step(2.9)
    assert b.state == PLAN
    b.step(3.1)
    assert b.state == ABORTED and 'no answer from the harness' in b.reason
    d = Agent(AgentParams(plan_timeout_s=1.0, perceive_timeout_s=5.0))
    d.start('x', 0.0)
    d.step(0.1, perception_ok=True)
    d.step(6.2)
    assert d.state == ABORTED and 'no harness' in d.reason
    c = Agent()
    c.start('x', 0.0)
    c.step(0.1, perception_ok=True)
    c.step(0.2, goal_accepted=False)
    assert c.state == ABORTED and 'rejected' in c.reason
