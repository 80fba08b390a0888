"""The CPython settings for a 50 Hz loop: a short GIL switch interval, a frozen heap."""

import gc
import sys
import weakref

from wam_core.serving.interpreter import (
    GIL_SWITCH_INTERVAL_S,
    freeze_heap,
    shorten_gil_switch_interval,
    thaw_heap,
)


class Node:
    pass


def test_switch_interval_is_shortened():
    before = sys.getswitchinterval()
    try:
        shorten_gil_switch_interval()
        assert abs(sys.getswitchinterval() - GIL_SWITCH_INTERVAL_S) < 1e-6
        assert sys.getswitchinterval() < 0.005  # the default, which made the tick wait
    finally:
        sys.setswitchinterval(before)


def test_frozen_objects_leave_the_collections_and_later_garbage_is_still_collected():
    try:
        startup = [Node() for _ in range(1000)]
        frozen = freeze_heap()
        assert frozen >= 1000 and gc.get_freeze_count() == frozen
        # what start-up built is no longer walked by a full collection
        assert not any(o is startup[0] for o in gc.get_objects(generation=2))
        # a reference cycle made after the freeze is still found and freed
        a, b = Node(), Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        gc.collect()
        assert gone() is None
        # thawed (a stack torn down in a process that goes on): collectable again
        thaw_heap()
        assert gc.get_freeze_count() == 0
        c, d = startup[0], startup[1]
        c.other, d.other = d, c
        gone = weakref.ref(c)
        del c, d, startup
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
