"""Latency windows and rate meters: the figures every status reports."""

from wam_core.serving.latency import LatencyWindow, RateMeter


def test_rate_meter_and_latency_window():
    r = RateMeter(window_s=2.0)
    for i in range(100):
        r.tick(10.0 + i * 0.02)  # 50 Hz for 2 s
    assert abs(r.rate(12.0) - 50.0) <= 1.0
    assert r.rate(20.0) == 0.0  # silence shows as 0 Hz
    w = LatencyWindow(size=10)
    for v in range(1, 21):
        w.add(float(v))
    s = w.summary()
    assert s['n'] == 10 and s['max'] == 20.0 and 15.0 <= s['p50'] <= 16.0
    assert w.max_ever == 20.0 and sorted(w.values()) == [float(v) for v in range(11, 21)]
