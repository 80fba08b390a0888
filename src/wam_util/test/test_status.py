"""Typed statuses: the /diagnostics key/values are derived from the message's fields."""

import math

from wam_interfaces.msg import ActionExpertStatus
from wam_util import convert
from wam_util.status import key_values


def test_every_field_becomes_a_labelled_value_in_field_order():
    msg = ActionExpertStatus(
        level=1,
        message='holding: stale',
        ticks=500,
        chunk_rate_hz=49.5,
        degraded=convert.reason_counts({'stale': 3, 'miss': 1}),
        latency=[convert.latency_stats('tick', {'p50': 1.0, 'p99': 2.5, 'max': 4.0, 'n': 500})],
    )
    values = dict(key_values(msg))
    assert 'level' not in values and 'message' not in values and 'header' not in values
    assert values['ticks'] == 500 and values['chunk rate Hz'] == 49.5
    assert values['degraded: miss'] == 1 and values['degraded: stale'] == 3
    assert (values['tick p50 ms'], values['tick p99 ms'], values['tick max ms']) == (1.0, 2.5, 4.0)
    labels = [k for k, _ in key_values(msg)]
    assert labels.index('ticks') < labels.index('chunk rate Hz') < labels.index('degraded: miss')


def test_gate_activity_becomes_values_per_joint():
    from wam_interfaces.msg import GateJointActivity, SafetyGateStatus

    msg = SafetyGateStatus(
        changed_share=0.01,
        gate_activity=[
            GateJointActivity(joint='arm_joint_2', changed_share=0.02, change_p99=0.004),
        ],
    )
    values = dict(key_values(msg))
    assert values['changed share'] == 0.01
    assert values['arm_joint_2 changed share'] == 0.02
    assert values['arm_joint_2 change p99'] == 0.004 and values['arm_joint_2 change max'] == 0.0


def test_status_parts_round_trip():
    assert convert.counts_of(convert.reason_counts({'b': 2, 'a': 1})) == {'a': 1, 'b': 2}
    empty = convert.latency_stats('x', {'p50': math.nan, 'p99': math.nan, 'max': math.nan, 'n': 0})
    assert empty.samples == 0 and convert.latency_of([empty], 'x') is empty
    assert convert.latency_of([empty], 'y') is None
