"""A periodic thread on absolute deadlines: the 50 Hz tick's clock.

An rclpy timer fires from the executor: its callback waits until the executor's thread
has finished whatever callback it is running (a camera frame, diagnostics, a service),
then for the executor to notice the timer. On this machine that made the tick's period
p99 21-23 ms against a 20 ms period. This thread sleeps until the next deadline on the
monotonic clock (``time.sleep`` is ``clock_nanosleep``), runs the tick, and computes the
next deadline from the grid, not from when the tick ran, so lateness never accumulates;
a tick that ends after the next deadline runs the next one at once, and one that
overruns whole periods skips those deadlines (counted) rather than firing in a burst.
The callback gets the deadline it runs for: the chunk's stamp is on the grid.

With ``priority`` > 0 the thread asks for SCHED_FIFO at that priority, as ros2_control's
controller manager does for its update loop: on a loaded machine a normal thread that
wakes at its deadline waits for a time slice (p99 3.5 ms here with both cores busy).
Without the privilege (CAP_SYS_NICE or an rtprio limit) it runs at normal priority and
``realtime_error`` says why.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ..common.thread_errors import ThreadErrors
from .realtime import request_fifo


class DeadlineTimer:
    def __init__(
        self,
        period_s: float,
        callback: Callable[[float], None],
        name: str = 'tick',
        priority: int = 0,
        errors: ThreadErrors | None = None,
    ):
        """``errors``: where a tick's exception is counted and logged with its traceback."""
        if not period_s > 0:
            raise ValueError(f'period must be positive, got {period_s}')
        self.priority = priority
        self.realtime = False
        self.realtime_error = ''
        self._started = threading.Event()
        self.period_s = period_s
        self.callback = callback
        self.name = name
        self.skipped = 0  # deadlines missed because a tick overran a whole period
        self.errors = 0
        self.last_error = ''
        self.thread_errors = errors
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self._started.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self._started.wait(1.0)  # the scheduling outcome is known when start() returns

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop and wait for a tick in progress; False if it did not end within timeout."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                return False
        self._thread = None
        return True

    def _set_priority(self) -> None:
        if self.priority <= 0:
            return
        self.realtime_error = request_fifo(self.priority)
        self.realtime = not self.realtime_error

    def _run(self) -> None:
        self._set_priority()
        self._started.set()
        deadline = time.monotonic() + self.period_s
        while not self._stop.is_set():
            delay = deadline - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if self._stop.is_set():
                break
            try:
                self.callback(deadline)
            except Exception as exc:  # a tick's bug must not stop the clock; counted, reported
                self.errors += 1
                self.last_error = f'{type(exc).__name__}: {exc}'
                if self.thread_errors is not None:
                    self.thread_errors.record(exc, self.name)
            deadline += self.period_s
            late = time.monotonic() - deadline
            if late >= self.period_s:  # overran whole periods: skip those deadlines
                missed = math.floor(late / self.period_s)
                self.skipped += missed
                deadline += missed * self.period_s
