"""Latency statistics over a fixed window, allocation-free on the hot path."""

from __future__ import annotations

import numpy as np

# samples a node's percentiles are taken over (a minute of a 50 Hz tick's)
WINDOW_SAMPLES = 3000


class LatencyWindow:
    """The last ``size`` samples (milliseconds) in a preallocated ring."""

    def __init__(self, size: int = WINDOW_SAMPLES):
        self._buf = np.zeros(size, dtype=np.float64)
        self._n = 0
        self._i = 0
        self.total = 0  # samples ever added
        self.max_ever = 0.0
        self.observers: list = []  # callables fed every sample (a metrics histogram)

    def add(self, value_ms: float) -> None:
        for observe in self.observers:
            observe(value_ms)
        self._buf[self._i] = value_ms
        self._i = (self._i + 1) % self._buf.size
        self._n = min(self._n + 1, self._buf.size)
        self.total += 1
        if value_ms > self.max_ever:
            self.max_ever = value_ms

    def values(self) -> np.ndarray:
        return (
            self._buf[: self._n].copy()
            if self._n < self._buf.size
            else np.roll(self._buf, -self._i)
        )

    def summary(self) -> dict[str, float]:
        if self._n == 0:
            return {'p50': float('nan'), 'p99': float('nan'), 'max': float('nan'), 'n': 0}
        v = self._buf[: self._n]
        p50, p99 = np.percentile(v, [50, 99])
        return {'p50': float(p50), 'p99': float(p99), 'max': float(v.max()), 'n': int(self._n)}


class StageTimer:
    """Named latency windows, e.g. cache_read / forward / publish / tick."""

    def __init__(self, *stages: str, size: int = WINDOW_SAMPLES):
        self.stages = {s: LatencyWindow(size) for s in stages}

    def add(self, stage: str, value_ms: float) -> None:
        self.stages[stage].add(value_ms)

    def summary(self) -> dict[str, dict[str, float]]:
        return {k: w.summary() for k, w in self.stages.items()}


class RateMeter:
    """Event rate (Hz): events in the last ``window_s`` seconds / ``window_s``.

    The ring must hold a window's worth of events (512 covers 2 s at 250 Hz).
    """

    def __init__(self, window_s: float = 2.0, size: int = 512):
        self.window_s = window_s
        self._t = np.full(size, -np.inf)
        self._i = 0
        self.count = 0

    def tick(self, t: float) -> None:
        self._t[self._i] = t
        self._i = (self._i + 1) % self._t.size
        self.count += 1

    def rate(self, now: float) -> float:
        return float(np.count_nonzero(self._t >= now - self.window_s)) / self.window_s
