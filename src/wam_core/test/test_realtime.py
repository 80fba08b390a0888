"""Scheduling for hot-path threads: granted as asked, or unchanged with a reason."""

import os
import threading

from wam_core.common.config import WorldExpertParams
from wam_core.serving.realtime import request_fifo, request_nice


def _in_thread(request, value: int):
    """The request's answer in a fresh thread, and that thread's policy, priority and
    nice value afterwards."""
    seen = {}

    def run():
        seen['error'] = request(value)
        tid = threading.get_native_id()
        seen['policy'] = os.sched_getscheduler(tid)
        seen['priority'] = os.sched_getparam(tid).sched_priority
        seen['nice'] = os.getpriority(os.PRIO_PROCESS, tid)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return seen


def test_a_granted_fifo_request_sets_the_calling_thread_only():
    seen = _in_thread(request_fifo, 50)
    if seen['error']:  # no privilege here: it says why and leaves the thread as it was
        assert 'refused' in seen['error'] and seen['policy'] == os.SCHED_OTHER
    else:
        assert (seen['policy'], seen['priority']) == (os.SCHED_FIFO, 50)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's own thread untouched


def test_the_encoders_nice_value_applies_to_its_thread_only():
    nice = WorldExpertParams().encoder_nice
    assert nice < 0  # a larger share than the node's other threads
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = _in_thread(request_nice, nice)
    if seen['error']:
        assert 'refused' in seen['error'] and seen['nice'] == before
    else:
        assert seen['nice'] == nice and seen['policy'] == os.SCHED_OTHER
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before


def test_zero_asks_for_nothing():
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert _in_thread(request_fifo, 0) == {
        'error': '', 'policy': os.SCHED_OTHER, 'priority': 0, 'nice': before,
    }  # fmt: skip
    assert _in_thread(request_nice, 0)['nice'] == before
