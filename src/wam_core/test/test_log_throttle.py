"""Per-tick conditions log the first occurrence, then one line a second per reason with
the exact count (issue 27, item 2)."""

from wam_core.common.log_throttle import ReasonThrottle


def test_first_at_once_then_one_line_a_second_with_the_count():
    now_ms = [0]
    t = ReasonThrottle(1.0, clock=lambda: now_ms[0] / 1000)
    assert t.note('stale') == ''  # the first: at once
    lines = []
    for _ in range(50):  # the next second, a tick every 20 ms
        now_ms[0] += 20
        lines.append(t.note('stale'))
    assert all(x is None for x in lines[:-1])  # quiet within the second
    assert lines[-1] == ' (50 times in the last 1.0 s)'  # nothing lost: the count
    now_ms[0] += 20
    assert t.note('stale') is None


def test_reasons_are_throttled_apart():
    now = [0.0]
    t = ReasonThrottle(1.0, clock=lambda: now[0])
    assert t.note('stale') == '' and t.note('miss') == ''
    assert t.note('stale') is None and t.note('miss') is None
    now[0] = 5.0  # a single occurrence long after: logged plainly
    t2 = ReasonThrottle(1.0, clock=lambda: now[0])
    assert t2.note('x') == ''
    now[0] = 9.0
    assert t2.note('x') == ''
