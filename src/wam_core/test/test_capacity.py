"""The capacity planner's arithmetic (issue 26, item 4): the sizing rule, the world
expert's queue batch, and the host's capacity from unit costs and per-robot overheads."""

import math

import pytest

from wam_core.serving.capacity import (
    ComputeCosts,
    RobotOverheads,
    capacity_with_probes,
    encode_at,
    host_capacity,
    largest_carried,
    overheads_from_two,
    plan,
    queue_batch,
)

# a world expert that batches well: 6 ms alone, 12 ms for four
COSTS = ComputeCosts({1: 6.0, 2: 8.0, 4: 12.0, 8: 20.0}, 0.1, 0.4, 0.1, views=2)
NO_OVERHEAD = RobotOverheads()


def test_encode_cost_is_interpolated_between_measured_batches():
    assert encode_at(COSTS, 1) == 6.0 and encode_at(COSTS, 3) == pytest.approx(10.0)


def test_the_queue_forms_the_batch_of_frames_arriving_during_one_encode():
    assert queue_batch(COSTS, 30.0, 8) == 1.0  # 30 frames/s x 6 ms: under one frame
    b = queue_batch(COSTS, 400.0, 8)
    # a fixed point: the frames arriving while that batch encodes
    assert b == pytest.approx(400.0 * encode_at(COSTS, b) / 1e3, rel=1e-2)
    assert queue_batch(COSTS, 5000.0, 4) == 4.0  # capped at batch.max_size


def test_cores_grow_with_robots_and_instances_follow_the_sizing_rule():
    p1 = plan(1, COSTS, NO_OVERHEAD, 2.0)
    p4 = plan(4, COSTS, NO_OVERHEAD, 2.0)
    assert p4.total_cores > 3 * p1.total_cores
    # action: 50 ticks/s x (0.4 + 0.1 x 30/50) ms = 2.3 % of a core per robot; one
    # instance at 70 % of its clock thread carries ~30 robots, with 100 % redundancy two
    assert plan(20, COSTS, NO_OVERHEAD, 64.0).action_instances == 1
    assert plan(20, COSTS, NO_OVERHEAD, 64.0, redundancy=1.0).action_instances == 2
    assert plan(40, COSTS, NO_OVERHEAD, 64.0).action_instances == 2


def test_a_host_fits_robots_until_its_cores_or_the_encoder_thread_run_out():
    heavy = RobotOverheads({'world': 0.1, 'action': 0.2, 'harness': 0.1, 'robots': 0.2})
    n = host_capacity(COSTS, heavy, 2.0)
    assert plan(n, COSTS, heavy, 2.0).fits and not plan(n + 1, COSTS, heavy, 2.0).fits
    assert 'cores' in plan(n + 1, COSTS, heavy, 2.0).why_not
    assert host_capacity(COSTS, heavy, 4.0) > n  # more cores, more robots
    # with cores to spare the one encoder thread is the limit
    big = host_capacity(COSTS, NO_OVERHEAD, 256.0)
    assert 'encoder thread' in plan(big + 1, COSTS, NO_OVERHEAD, 256.0).why_not
    assert host_capacity(COSTS, RobotOverheads({'robots': 5.0}), 2.0) == 0


def test_overheads_split_into_each_robots_cost_and_the_processes_fixed_cost():
    one, two = (plan(n, COSTS, NO_OVERHEAD, math.inf, robots_per_instance=2) for n in (1, 2))
    # measured: each robot 0.05 cores beyond its compute in every role, the processes
    # 0.1 whatever their robots (the bench's own process 0.3 a robot, nothing fixed)
    m1 = {k: one.cores[k] + 0.05 + 0.1 for k in one.cores}
    m2 = {k: two.cores[k] + 0.10 + 0.1 for k in two.cores}
    m1['robots'], m2['robots'] = 0.3, 0.6
    over = overheads_from_two(m1, m2, COSTS)
    assert over.cores['world'] == pytest.approx(0.05) and over.fixed['world'] == pytest.approx(0.1)
    assert over.cores['robots'] == pytest.approx(0.3) and over.fixed['robots'] == 0.0
    # the plan reproduces both measurements, and charges an action instance's fixed
    # cost once per instance (2 robots each): 4 robots on 2 instances
    for n, measured in ((1, m1), (2, m2)):
        again = plan(n, COSTS, over, 2.0)
        assert again.total_cores == pytest.approx(sum(measured.values()))
    p3, p4 = plan(3, COSTS, over, 2.0), plan(4, COSTS, over, 2.0)
    assert p4.cores['action'] - p3.cores['action'] == pytest.approx(
        p3.cores['action'] - plan(2, COSTS, over, 2.0).cores['action'] - 0.1
    )
    # noise: a second robot measured cheaper than the first costs nothing, never less,
    # and a role measured below its compute has no fixed cost either
    cheap = overheads_from_two({'world': 0.5}, {'world': 0.4}, COSTS)
    assert cheap.cores['world'] == 0.0
    assert overheads_from_two({}, {}, COSTS).fixed['world'] == 0.0


def test_the_host_and_the_encoder_thread_have_their_own_budgets():
    heavy = RobotOverheads({'world': 0.1, 'action': 0.2, 'harness': 0.1, 'robots': 0.2})
    # the host budget moves the core-bound capacity, not the encoder thread's
    tight, loose = (host_capacity(COSTS, heavy, 2.0, utilization=u) for u in (0.5, 0.9))
    assert tight < loose
    assert host_capacity(COSTS, heavy, 2.0, thread_utilization=0.5) == host_capacity(
        COSTS, heavy, 2.0, thread_utilization=0.9
    )
    assert host_capacity(COSTS, NO_OVERHEAD, 256.0, utilization=0.5) == host_capacity(
        COSTS, NO_OVERHEAD, 256.0, utilization=0.9
    )
    assert 'cores' in plan(loose + 1, COSTS, heavy, 2.0, utilization=0.9).why_not
    # on a big host the encoder thread decides, by its own budget
    a, b = (host_capacity(COSTS, NO_OVERHEAD, 256.0, thread_utilization=t) for t in (0.5, 0.9))
    assert a < b
    over = plan(a + 1, COSTS, NO_OVERHEAD, 256.0, thread_utilization=0.5)
    assert 'encoder thread' in over.why_not


def test_a_fleet_grows_one_robot_at_a_time():
    assert largest_carried({1: True, 2: True, 4: False, 8: True}) == 2  # 8 does not count
    assert largest_carried({1: False, 2: True}) == 0
    assert largest_carried({2: True, 3: True}) == 3
    assert largest_carried({}) == 0


def test_the_model_is_checked_against_the_sizes_the_planner_watched():
    # the model too cautious: the probe of 2 robots met the limits
    assert capacity_with_probes(1, {1: True, 2: True}) == 2
    # the model too bold: the probe of 2 robots missed them
    assert capacity_with_probes(3, {1: True, 2: False}) == 1
    assert capacity_with_probes(3, {1: False, 2: True}) == 0
    # beyond the probes the model decides
    assert capacity_with_probes(4, {1: True, 2: True}) == 4
    assert capacity_with_probes(0, {}) == 0
