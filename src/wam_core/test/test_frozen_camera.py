"""The joint positions a frozen-camera check compares: by stamp, not by arrival."""

import numpy as np

from wam_core.serving.frozen_camera import FrozenCameraCheck, JointTrack

MS = 1_000_000


def test_joint_positions_are_interpolated_at_a_stamp_and_unknown_far_from_any():
    track = JointTrack()
    assert track.at(0) is None
    track.add(100 * MS, np.zeros(2))
    track.add(110 * MS, np.array([1.0, -1.0]))
    assert np.allclose(track.at(104 * MS), [0.4, -0.4])
    assert np.allclose(track.at(125 * MS), [1.0, -1.0])  # the newest, 15 ms on
    assert np.allclose(track.at(80 * MS), [0.0, 0.0])  # the oldest, 20 ms before
    assert track.at(150 * MS) is None and track.at(60 * MS) is None


def test_a_gap_in_the_joint_states_is_not_bridged_and_a_clock_step_back_starts_over():
    track = JointTrack()
    track.add(0, np.zeros(1))
    track.add(200 * MS, np.ones(1))
    assert track.at(100 * MS) is None  # 100 ms from both: the arm may have done anything
    assert np.allclose(track.at(190 * MS), [1.0])
    track.add(50 * MS, np.full(1, 5.0))  # stepped back: the old stamps are gone
    assert track.at(190 * MS) is None and np.allclose(track.at(50 * MS), [5.0])


def test_a_repeat_is_frozen_by_the_motion_between_the_stamps_of_the_two_pictures():
    check = FrozenCameraCheck(0.0005)
    for k in range(10):  # the arm moves 0.1 mrad per 10 ms
        check.joints.add(k * 10 * MS, np.full(3, k * 1e-4))
    check.new_content('a', 0)
    assert check.frozen('a', 40 * MS) is None  # 0.4 mrad: within the threshold
    moved = check.frozen('a', 60 * MS)
    assert moved is not None and abs(moved - 6e-4) < 1e-12
    # another picture the cache still had (or a restarted expert's first): a new start
    assert check.frozen('b', 90 * MS) is None and check.frozen('b', 90 * MS) is None


def test_a_picture_repeated_after_its_stamp_left_the_history_is_still_judged():
    """A camera that stalls for seconds and comes back repeating its last picture while
    the arm has moved meanwhile is frozen, though the picture's stamp is long gone from
    the joint states kept."""
    check = FrozenCameraCheck(0.0005)
    check.joints.add(0, np.zeros(3))
    check.new_content('a', 0)
    for k in range(1, 400):  # 4 s of joint states: the first 2 s leave the history
        check.joints.add(k * 10 * MS, np.full(3, 0.01))
    assert check.joints.at(0) is None
    moved = check.frozen('a', 3990 * MS)
    assert moved is not None and abs(moved - 0.01) < 1e-12
