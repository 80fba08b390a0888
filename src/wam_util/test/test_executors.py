"""spin_slice returns when its time is up, even in a process that falls behind."""

import threading
import time

import pytest
import rclpy
from rclpy.node import Node

from wam_util.executors import make_executor, spin_slice


@pytest.fixture
def behind():
    """An executor with a timer whose callback (40 ms) outlasts its period (20 ms):
    the queue never empties."""
    rclpy.init()
    node = Node('falling_behind')
    calls = []
    node.create_timer(0.02, lambda: (calls.append(1), time.sleep(0.04)))
    executor = make_executor()
    executor.add_node(node)
    yield executor, calls
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()


def test_a_slice_ends_in_a_process_that_falls_behind(behind):
    executor, calls = behind
    took = []

    def slices():
        for _ in range(3):
            t = time.monotonic()
            spin_slice(executor, 0.1)
            took.append(time.monotonic() - t)

    runner = threading.Thread(target=slices, daemon=True)
    runner.start()
    runner.join(timeout=5.0)
    # (without the slice's own ender the events queue kept the first slice for good)
    assert not runner.is_alive(), f'a 0.1 s slice did not return: {took}'
    assert len(took) == 3
    # the slice, plus the callback under way when it ended (40 ms), plus scheduling
    assert max(took) < 1.0, took  # a loaded host may add to that, never seconds
    assert len(calls) >= 3  # the callbacks did run meanwhile


def test_a_slice_with_nothing_to_do_lasts_its_time():
    rclpy.init()
    try:
        executor = make_executor()
        t = time.monotonic()
        spin_slice(executor, 0.15)
        took = time.monotonic() - t
        executor.shutdown()
    finally:
        rclpy.try_shutdown()
    assert 0.12 < took < 1.5, took


def test_a_callback_failing_after_shutdown_ends_the_spin_as_a_shutdown():
    """A signal shuts the context down while callbacks are queued: their publishes fail,
    and the spin loop must see a shutdown, not a crash."""
    from rclpy.executors import ExternalShutdownException
    from std_msgs.msg import Empty

    from wam_util.executors import spin_until_shutdown

    rclpy.init()
    node = Node('publishing_behind')
    pub = node.create_publisher(Empty, 'ticks', 10)
    node.create_timer(0.02, lambda: (time.sleep(0.03), pub.publish(Empty())))
    executor = make_executor()
    executor.add_node(node)
    raised = []

    def spin():
        try:
            spin_slice(executor, 5.0)
        except Exception as exc:  # what a caller's loop would see
            raised.append(exc)

    runner = threading.Thread(target=spin, daemon=True)
    runner.start()
    time.sleep(0.3)
    rclpy.shutdown()
    runner.join(timeout=6.0)
    assert not runner.is_alive()
    assert raised and isinstance(raised[0], ExternalShutdownException), raised
    spin_until_shutdown(executor)  # returns at once: the context is down
    executor.shutdown()
    node.destroy_node()
