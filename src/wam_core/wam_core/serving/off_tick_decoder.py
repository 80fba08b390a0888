"""An action expert slower than a control period, served without a late chunk.

A π0 action expert runs 10 flow-matching steps of a transformer per chunk: tens of ms on
a CPU, more than a 20 ms period. Run on the tick, every tick would overrun and none
would publish. Here the tick asks for a decode at a grid point; this thread reads the
cache (version, TTL and seqlock rules as on the tick), prepares and decodes at its own
pace, and hands the chunk back; the tick that finds it finished publishes it, stamped
on the control grid for when it will apply (the serving loop picks the lead from how
many periods have passed since the decode's grid point), blended into the running
chunk, and asks for the next decode. Meanwhile the robot keeps executing the running
chunk. Chunks then arrive every ``ceil(decode / period)`` periods, never late (the lead
covers the time taken) and never from a representation past the TTL (it is checked when
the decode starts, as the tick checks it).

Decodes start on grid points, not back to back: the model's row 0 is the target at its
observation, and a decode started between grid points would stamp its rows up to a
period early. LeRobot's async inference and Physical Intelligence's real-time chunking
solve the same problem outside the control loop; this is inside it, for every action
expert whose decode does not fit a period.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..common.thread_errors import ThreadErrors
from .action_ticker import ActionTicker, TickResult
from .latency import LatencyWindow


@dataclass
class Decoded:
    """A finished decode: what the tick would have returned, for the grid point it was
    asked for, and the joint state it decoded from."""

    result: TickResult
    grid_s: float  # the grid point (monotonic s) the decode was asked for
    joint_state: np.ndarray | None  # the state the chunk starts from (configured order)
    decode_ms: float


class OffTickDecoder:
    def __init__(
        self,
        ticker: ActionTicker,
        num_threads: int = 1,
        name: str = 'action_decode',
        errors: ThreadErrors | None = None,
    ):
        """``errors``: where a decode's exception is counted and logged with its traceback."""
        self.ticker = ticker
        self.thread_errors = errors
        self.num_threads = num_threads
        self.name = name
        self.decode_ms = LatencyWindow()  # request -> chunk ready, ms
        self.decodes = 0
        self.errors = 0
        self.last_error = ''
        self._cv = threading.Condition()
        self._request: float | None = None
        self._done: Decoded | None = None
        self._busy = False
        self._started = 0.0  # when the decode in flight began (monotonic s)
        self._running = False
        self._thread: threading.Thread | None = None

    def in_flight_s(self) -> float:
        """How long the decode in flight has been running (0 when none is)."""
        with self._cv:
            return time.monotonic() - self._started if self._busy else 0.0

    @property
    def busy(self) -> bool:
        """A decode is asked for or running, and not yet taken."""
        with self._cv:
            return self._busy or self._request is not None

    def start(self) -> None:
        with self._cv:
            if self._running:
                return
            self._running = True
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop taking requests and wait for a decode in progress; False if it did not end
        within ``timeout`` (a decode of a large model on a CPU can take seconds)."""
        with self._cv:
            self._running = False
            self._request = None
            self._cv.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                return False
        self._thread = None
        return True

    def submit(self, grid_s: float) -> bool:
        """Ask for a decode for the grid point ``grid_s``; False while one is in flight or
        its result has not been taken (one at a time: the newest inputs win)."""
        with self._cv:
            if not self._running or self._busy or self._request is not None or self._done:
                return False
            self._request = grid_s
            self._cv.notify()
            return True

    def take(self) -> Decoded | None:
        """The finished decode, once; None while there is none."""
        with self._cv:
            done, self._done = self._done, None
            return done

    def _run(self) -> None:
        torch.set_num_threads(self.num_threads)  # per thread in OpenMP builds
        while True:
            with self._cv:
                while self._running and self._request is None:
                    self._cv.wait()
                if not self._running:
                    return
                grid_s, self._request = self._request, None
                self._busy = True
                self._started = time.monotonic()
            t0 = time.perf_counter()
            try:
                res = self.ticker.tick()
            except Exception as exc:  # a decode's bug must not end serving: counted, held
                self.errors += 1
                self.last_error = f'{type(exc).__name__}: {exc}'
                if self.thread_errors is not None:
                    self.thread_errors.record(exc, self.name)
                res = TickResult('degraded', None, 'decode_error')
                self.ticker.degraded['decode_error'] = (
                    self.ticker.degraded.get('decode_error', 0) + 1
                )
            ms = (time.perf_counter() - t0) * 1e3
            used = self.ticker.joint_state_used
            done = Decoded(res, grid_s, None if used is None else used.copy(), ms)
            if res.kind == 'chunk':
                self.decode_ms.add(ms)
            self.decodes += 1
            with self._cv:
                self._done = done
                self._busy = False
