"""Prometheus metrics of running nodes, scraped over HTTP: latency histograms, the typed
statuses (degraded ticks by reason, cache hits, safety stops, plans), the task's goal id."""

import os
import random

import httpx
from prometheus_client.parser import text_string_to_metric_families

from robot_agent.stack import Stack, override
from wam_core.common.paths import default_config, resolve_path
from wam_core.common.process import free_port
from wam_core.models.manifest import read_manifest

CONFIG = default_config()


def _scrape(port: int) -> dict:
    text = httpx.get(f'http://127.0.0.1:{port}/metrics', timeout=5).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(family, suffix: str = '', **labels) -> float:
    return sum(
        s.value
        for s in family.samples
        if s.name.endswith(suffix) and all(s.labels.get(k) == v for k, v in labels.items())
    )


def test_each_node_serves_its_metrics_and_the_task_carries_its_goal_id():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))
    ports = {n: free_port() for n in ('world_expert', 'action_expert', 'harness', 'task_manager')}
    args = [a for n, p in ports.items() for a in override(n, 'metrics_port', p)]
    stack = Stack('single', CONFIG, robot='sim', agent=True, extra_args=args)
    try:
        stack.wait_ready(60)
        stack.spin_for(
            6.0, until=lambda: stack.monitor.task is not None and stack.monitor.task.goal_id
        )
        stack.spin_for(2.5)  # a status round after the plan
        # enough chunks for the figures below, however slow the single-process sim stack
        # is at the moment (its rate is the benches' question)
        stack.spin_for(
            15.0,
            until=lambda: stack.monitor.action is not None and stack.monitor.action.chunks > 60,
        )
        stack.spin_for(1.2)  # the status the exporter reads has caught up
        action = _scrape(ports['action_expert'])
        assert _value(action['wam_tick_seconds'], '_count') > 50
        assert _value(action['wam_period_seconds'], '_count') > 50
        assert (
            0.015
            < _value(action['wam_period_seconds'], '_sum')
            / _value(action['wam_period_seconds'], '_count')
            < 0.025
        )  # the 50 Hz timer, in seconds
        assert 'wam_action_expert_degraded' in action  # by reason (a counter)
        assert _value(action['wam_action_expert_chunks']) > 50
        # every figure of a status that names its release carries the robot and the release
        # (a lone robot: robot ''; the release: the model's version, no release named)
        release = read_manifest(resolve_path('models/action_expert')).version
        assert _value(action['wam_action_expert_chunks'], robot='', release=release) > 50
        world = _scrape(ports['world_expert'])
        assert _value(world['wam_encode_seconds'], '_count') > 10
        assert _value(world['wam_world_expert_calls_per_distinct_frame']) == 1.0
        harness = _scrape(ports['harness'])  # the gate: nothing of the planner's
        assert _value(harness['wam_safety_gate_forwarded_commands'], release=release) > 0
        assert 'wam_safety_gate_safety_stops' in harness
        assert _value(harness['wam_clamp_seconds'], '_count') > 10
        assert 'wam_plan_seconds' not in harness and 'wam_task_info' not in harness
        tasks = _scrape(ports['task_manager'])
        assert _value(tasks['wam_plan_seconds'], '_count') >= 1
        goal = stack.monitor.task.goal_id
        assert len(goal) == 32 and _value(tasks['wam_task_info'], goal_id=goal) == 1.0
        assert _value(tasks['wam_task_manager_plans'], reason='rules') >= 1
    finally:
        stack.shutdown()
    # stopped with the node: the port is free again
    try:
        httpx.get(f'http://127.0.0.1:{ports["harness"]}/metrics', timeout=1)
        raise AssertionError('the metrics endpoint outlived its node')
    except httpx.HTTPError:
        pass
