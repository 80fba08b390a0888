"""An action expert slower than a period, and one trained at another period: the decode
runs off the tick and hands its chunk back once; a chunk is resampled onto the control
period. (The stamping of such chunks is the action expert node's: test_action_node.)"""

import math
import time

import numpy as np
import pytest
import torch

from wam_core.cache.inprocess import InProcessCache
from wam_core.control.resample import resample_chunk, resampled_horizon
from wam_core.models.contract import ActionExpertSpec
from wam_core.serving.action_ticker import ActionTicker
from wam_core.serving.off_tick_decoder import OffTickDecoder

SHAPE = (4, 8)
JOINTS = tuple(f'j{i}' for i in range(3))


class SlowRamp:
    """An action expert whose chunk row k is the joint state + k * step, after ``delay_s``."""

    def __init__(self, period_s=0.02, horizon=16, delay_s=0.0, fail=False):
        self.spec = ActionExpertSpec(JOINTS, horizon, period_s, SHAPE, 0, 'v1')
        self.version, self.name = 'v1', 'slow-ramp'
        self.dtype, self.device = torch.float32, torch.device('cpu')
        self.delay_s, self.fail = delay_s, fail

    def prepare(self, representation):
        return representation.sum()

    def decode(self, context, joint_state, conditioning):
        if self.fail:
            raise RuntimeError('boom')
        time.sleep(self.delay_s)
        steps = torch.arange(self.spec.horizon, dtype=torch.float32)[:, None] * 0.1
        return (joint_state + steps)[None]


def _ticker(model, period_s=0.02):
    cache = InProcessCache(4, 60_000, 'v1')
    cache.put('ab' * 16, time.time_ns(), np.ones(SHAPE, np.float32))
    t = ActionTicker(model, cache, 'v1', 3, 0, math.inf, period_s)
    t.set_joint_state(np.zeros(3))
    return t


def test_resampling_keeps_row_0_and_the_span_and_interpolates_in_time():
    rows = np.arange(16, dtype=np.float64)[:, None] * np.ones((1, 3))  # row k = k
    out = resample_chunk(rows, 1 / 30, 0.02)  # a 30 Hz policy on a 50 Hz loop
    assert out.shape == (26, 3) == (resampled_horizon(16, 1 / 30, 0.02), 3)
    t = np.arange(26) * 0.02 * 30  # the new rows' times in model rows
    assert np.allclose(out[:, 0], t) and out[-1, 0] <= 15.0
    assert np.allclose(resample_chunk(rows, 0.02, 0.02), rows)
    with pytest.raises(ValueError, match='at least 2 rows'):
        resample_chunk(rows[:1], 0.02, 0.01)


def test_the_ticker_resamples_a_chunk_trained_at_another_period():
    res = _ticker(SlowRamp(period_s=1 / 30)).tick()
    assert res.kind == 'chunk' and res.positions.shape == (26, 3)
    assert np.allclose(res.positions[:, 0], np.arange(26) * 0.02 * 30 * 0.1, atol=1e-6)


def test_a_decode_runs_off_the_tick_and_is_handed_back_once():
    decoder = OffTickDecoder(_ticker(SlowRamp(delay_s=0.05)))
    decoder.start()
    try:
        assert decoder.take() is None
        assert decoder.submit(10.0) and decoder.busy
        assert not decoder.submit(10.02)  # one at a time
        assert decoder.take() is None  # still decoding
        end = time.monotonic() + 2.0
        done = None
        while done is None and time.monotonic() < end:
            time.sleep(0.005)
            done = decoder.take()
        assert done is not None and done.result.kind == 'chunk'
        assert done.grid_s == 10.0 and done.decode_ms >= 45.0
        assert np.array_equal(done.joint_state, np.zeros(3, np.float32))
        assert decoder.take() is None and not decoder.busy  # once
        assert decoder.decode_ms.summary()['n'] == 1
    finally:
        assert decoder.stop()


def test_a_decode_that_raises_is_counted_and_serving_goes_on():
    ticker = _ticker(SlowRamp(fail=True))
    decoder = OffTickDecoder(ticker)
    decoder.start()
    try:
        for grid in (1.0, 2.0):
            assert decoder.submit(grid)
            end = time.monotonic() + 2.0
            done = None
            while done is None and time.monotonic() < end:
                time.sleep(0.002)
                done = decoder.take()
            assert done.result.kind == 'degraded' and done.result.reason == 'decode_error'
        assert decoder.errors == 2 and 'boom' in decoder.last_error
        assert ticker.degraded['decode_error'] == 2
    finally:
        assert decoder.stop()
