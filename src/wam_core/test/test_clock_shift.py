"""The injected wall-clock shift a drill steps, as the drill's own checker reads it."""

import os
import time

import pytest

from wam_core.common import clock


@pytest.fixture
def shift_file(tmp_path):
    path = str(tmp_path / 'shift_ns')
    os.environ[clock.SHIFT_ENV] = path
    clock._written.clear()
    yield path
    os.environ.pop(clock.SHIFT_ENV, None)
    clock._written.clear()


def test_a_receipt_before_a_step_is_judged_by_the_shift_then_in_force(shift_file):
    before = time.time_ns()
    time.sleep(0.002)
    clock.write_shift(shift_file, 500_000_000)
    time.sleep(0.002)
    after = time.time_ns()
    time.sleep(0.002)
    clock.write_shift(shift_file, 0)
    # a message received before the step, handled after it: the old shift
    assert clock.shift_at(before) == 0
    assert clock.shift_at(after) == 500_000_000
    assert clock.shift_at(time.time_ns()) == 0
    time.sleep(0.002)
    assert clock.injected_shift_ns() == 0  # what every process reads now


def test_without_writes_of_its_own_a_process_reads_the_shift_now(shift_file):
    with open(shift_file, 'w', encoding='ascii') as fh:
        fh.write('250000000')
    time.sleep(0.002)
    assert clock.shift_at(0) == 250_000_000
