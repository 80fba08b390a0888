import math

import numpy as np
import pytest

from wam_core.control.joint_state import JointStateError, JointStateMapper


def test_reorders_and_ignores_extra_joints():
    m = JointStateMapper(['a', 'b', 'c'])
    out = m.map(['c', 'x', 'a', 'b'], [3.0, 9.0, 1.0, 2.0])
    assert np.allclose(out, [1, 2, 3])


@pytest.mark.parametrize(
    'names,pos,match',
    [
        (['a', 'b'], [1.0, 2.0], 'missing'),
        (['a', 'b', 'c'], [1.0, 2.0], 'names but'),
        (['a', 'b', 'c'], [1.0, math.nan, 2.0], 'non-finite'),
        (['a', 'b', 'c'], [1.0, math.inf, 2.0], 'non-finite'),
        (['a', 'a', 'c'], [1.0, 1.0, 2.0], 'duplicate'),
    ],
)
def test_bad_joint_states_are_rejected(names, pos, match):
    with pytest.raises(JointStateError, match=match):
        JointStateMapper(['a', 'b', 'c']).map(names, pos)


@pytest.mark.parametrize(
    'names,pos,reason',
    [
        (['a', 'b'], [1.0, 2.0], 'missing'),
        (['a', 'b', 'c'], [1.0, 2.0], 'length'),
        (['a', 'b', 'c'], [1.0, math.nan, 2.0], 'non_finite'),
        (['a', 'a', 'c'], [1.0, 1.0, 2.0], 'duplicate'),
    ],
)
def test_a_rejection_carries_its_reason_code(names, pos, reason):
    """Counters key on a code, not on words in a message (issue 24, item 12)."""
    with pytest.raises(JointStateError) as exc:
        JointStateMapper(['a', 'b', 'c']).map(names, pos)
    assert exc.value.reason == reason
