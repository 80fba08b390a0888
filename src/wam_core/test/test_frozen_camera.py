"""The frozen-camera check: each picture against its own first frame, by stamps."""

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


def test_a_gap_is_not_bridged_a_late_state_is_dropped_and_a_clock_step_back_starts_over():
    track = JointTrack()
    track.add(0, np.zeros(1))
    track.add(200 * MS, np.ones(1))
    assert track.at(100 * MS) is None  # 100 ms from both: the arm may have done anything
    assert np.allclose(track.at(190 * MS), [1.0])
    track.add(190 * MS, np.full(1, 9.0))  # out of order by 10 ms: dropped
    assert np.allclose(track.at(190 * MS), [1.0]) and track.newest() == 200 * MS
    track.add(50 * MS, np.full(1, 5.0))  # stepped back 150 ms: the old stamps are gone
    assert track.at(190 * MS) is None and np.allclose(track.at(50 * MS), [5.0])


def _moving(check, until_ms: int, rate: float = 1e-5) -> None:
    """Joint states every 10 ms, the arm moving ``rate`` rad per ms."""
    for t in range(0, until_ms + 1, 10):
        check.joints.add(t * MS, np.full(3, t * rate))


def test_a_repeat_is_frozen_by_the_motion_between_the_stamps_of_the_two_pictures():
    check = FrozenCameraCheck(0.0005)
    _moving(check, 90)
    check.seen('a', 0)
    assert check.frozen('a', 40 * MS) is None  # 0.4 mrad: within the threshold
    moved = check.frozen('a', 60 * MS)
    assert moved is not None and abs(moved - 6e-4) < 1e-12
    # a picture the cache had before this check knew it (a restarted expert): a new start
    assert check.frozen('b', 90 * MS) is None and check.frozen('b', 90 * MS) is None


def test_a_driver_replaying_its_last_frames_in_turn_is_caught_on_each():
    """A, B, A, B...: each repeat is judged against its own picture's first frame, not
    against the picture before it (which changes every frame)."""
    check = FrozenCameraCheck(0.0005)
    _moving(check, 200)
    check.seen('a', 0)
    check.seen('b', 33 * MS)
    assert check.frozen('a', 66 * MS) is not None  # 0.66 mrad since a's first frame
    assert check.frozen('b', 100 * MS) is not None  # 0.67 mrad since b's


def test_a_picture_encoded_again_keeps_its_first_frame():
    """Evicted from the cache or after a release switch the same picture is encoded again;
    a frozen camera must not get a new start from it."""
    check = FrozenCameraCheck(0.0005)
    _moving(check, 100)
    check.seen('a', 0)
    check.seen('a', 40 * MS)
    assert check.frozen('a', 60 * MS) is not None


def test_a_repeat_stamped_on_an_older_time_line_is_not_judged():
    """A frame stamped after a clock step back that arrives before the first joint state
    of the new time line: the states kept are from the old one."""
    check = FrozenCameraCheck(0.0005)
    _moving(check, 1000)
    check.seen('a', 990 * MS)
    assert check.frozen('a', 500 * MS) is None and check.unjudged == 1


def test_a_picture_repeated_after_its_stamp_left_the_history_is_still_judged():
    """A camera that stalls for seconds and comes back repeating its last picture while
    the arm has moved meanwhile is frozen, though the picture's stamp is long gone from
    the joint states kept."""
    check = FrozenCameraCheck(0.0005)
    check.joints.add(0, np.zeros(3))
    check.seen('a', 0)
    for k in range(1, 400):  # 4 s of joint states: the first 2 s leave the history
        check.joints.add(k * 10 * MS, np.full(3, 0.01))
    assert check.joints.at(0) is None
    moved = check.frozen('a', 3990 * MS)
    assert moved is not None and abs(moved - 0.01) < 1e-12
