"""SCHED_FIFO for a hot-path thread: granted as asked, or normal scheduling with a reason."""

import os
import threading

from wam_core.common.config import ActionExpertParams, ActionInstanceParams, WorldExpertParams
from wam_core.serving.realtime import request_fifo


def _in_thread(priority: int):
    """request_fifo's answer in a fresh thread, and that thread's policy and priority."""
    seen = {}

    def run():
        seen['error'] = request_fifo(priority)
        tid = threading.get_native_id()
        seen['policy'] = os.sched_getscheduler(tid)
        seen['priority'] = os.sched_getparam(tid).sched_priority

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return seen


def test_a_granted_request_sets_fifo_on_the_calling_thread_only():
    priority = WorldExpertParams().realtime_priority
    seen = _in_thread(priority)
    if seen['error']:  # no privilege here: it says why and leaves the thread as it was
        assert 'refused' in seen['error'] and seen['policy'] == os.SCHED_OTHER
    else:
        assert (seen['policy'], seen['priority']) == (os.SCHED_FIFO, priority)
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the caller's own thread untouched


def test_priority_zero_asks_for_nothing():
    assert _in_thread(0) == {'error': '', 'policy': os.SCHED_OTHER, 'priority': 0}


def test_by_default_the_encoder_ranks_below_every_tick():
    """A decode due now outranks the next representation."""
    encoder = WorldExpertParams().realtime_priority
    assert 0 < encoder < ActionExpertParams().realtime_priority
    assert encoder < ActionInstanceParams().realtime_priority
