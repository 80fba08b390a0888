"""The short fault drill in `make test`: kill -9 of the world expert, a camera stall, a
frozen camera (the same picture with new stamps while the arm moves: the world expert's
check of the joint states at the pictures' stamps, end to end), and a wall-clock step of
+-500 ms.

The multi-process stack runs on the MuJoCo robot; `wam_system_tests.faults` injects each
fault and a recorder on /arm_controller/joint_trajectory checks every forwarded point.
Asserted here without slack: no point breaks a joint limit, no full chunk rests on a
representation older than TTL + one control period, every forwarded trajectory is one
joint_trajectory_controller accepts, the robot holds its last valid action and then
brakes, the stack recovers by itself, and no shared-memory segment or process is left
behind. The timing targets (hold within 70 ms, recovery within 2 s, over 20 runs each)
are measured by `make faults REPEAT=20`, a benchmark; here the figures are printed and
only bound loosely (a hold within 0.5 s, a recovery within 10 s): a restarted process's
start-up on this shared 2-core machine varies by seconds.
"""

import os
import random
import uuid

import pytest

from wam_system_tests import faults


@pytest.fixture(autouse=True)
def domain():
    os.environ['ROS_DOMAIN_ID'] = str(random.randint(1, 200))


def test_world_expert_kill_camera_stall_frozen_frame_and_clock_step():
    out = faults.run(
        ['world_kill', 'camera_stall', 'frozen_frame', 'clock_step'],
        shm_name=f'wam_faults_{uuid.uuid4().hex[:8]}',
    )
    for r in out['faults']:
        print(
            f'{r["fault"]}: hold {r["hold_ms"]} ms, recovery {r["recovery_s"]} s, '
            f'unsafe {r["unsafe"]}, '
            f'stale {r["stale"]} ({r["notes"]})'
        )
    assert [r['fault'] for r in out['faults']] == [
        'world_kill',
        'camera_stall',
        'frozen_frame',
        'clock_step',
    ]
    for r in out['faults']:
        assert r['unsafe'] == 0, r
        assert r['stale'] == 0, r
        # clock_step: a trajectory in flight across the injected +500 ms step is judged
        # by the clock it was sent by (and noted apart). Left: the gate reads the shift
        # file at most every millisecond, so a chunk checked just before the step and
        # published just after it is judged by the new clock: at most one, never a stale
        # or unsafe chunk
        assert r['conformance'] <= (1 if r['fault'] == 'clock_step' else 0), r
        if r['fault'] != 'clock_step':  # a step need not brake the robot: chunks go on
            assert r['brake_ms'] is not None and r['brake_ms'] <= 1000.0, r
        assert r['hold_ms'] is not None and r['hold_ms'] <= 500.0, r
        assert r['recovery_s'] is not None and r['recovery_s'] <= 10.0, r
    # every violation is the clock step's one allowed above (the per-fault counts add up)
    stepped = sum(r['conformance'] for r in out['faults'] if r['fault'] == 'clock_step')
    assert out['conformance_checked'] > 50, out
    assert out['conformance_violations'] == stepped, out['conformance_examples']
    assert out['leaked_segments'] == [] and out['leaked_processes'] == []
