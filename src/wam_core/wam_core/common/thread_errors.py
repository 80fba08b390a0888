"""Exceptions caught on a worker thread: counted, kept, logged with their traceback.

A worker thread (the 50 Hz tick, the world expert's encoder, an off-tick decode, a
Mooncake fetch) must survive a bad iteration: it catches the exception and goes on.
Caught and forgotten, a recurring bug is invisible: a fuzz test's "no node raises" holds
while every tick fails. ``ThreadErrors`` counts each thread's exceptions (the nodes put
the counts in their typed status, ``thread_errors``), keeps the last one's text, and
logs it with its traceback at most once per ``log_every_s`` per thread, so a failure
that repeats every tick neither floods the log nor goes unseen.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable


class ThreadErrors:
    def __init__(self, log: Callable[[str], None] | None = None, log_every_s: float = 5.0):
        self.log = log  # where the traceback goes (a node's error logger)
        self.log_every_s = log_every_s
        self.counts: dict[str, int] = {}  # thread -> exceptions caught
        self.last: dict[str, str] = {}  # thread -> 'Type: message' of the latest
        self._logged: dict[str, float] = {}
        self._latest = ''
        self._lock = threading.Lock()

    def record(self, exc: BaseException, where: str | None = None) -> None:
        """Count ``exc``, caught on thread ``where`` (default: the current thread's name)."""
        where = where or threading.current_thread().name
        now = time.monotonic()
        with self._lock:
            self.counts[where] = self.counts.get(where, 0) + 1
            self.last[where] = f'{type(exc).__name__}: {exc}'
            self._latest = f'{where}: {self.last[where]}'
            n = self.counts[where]
            due = now - self._logged.get(where, -float('inf')) >= self.log_every_s
            if due:
                self._logged[where] = now
        if due and self.log is not None:
            trace = ''.join(traceback.format_exception(exc)).rstrip()
            self.log(
                f'{where}: exception {n} caught and survived (logged at most every '
                f'{self.log_every_s:g} s):\n{trace}'
            )

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.counts.values())

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    def latest(self) -> str:
        """'thread: Type: message' of the most recent thread to fail, or ''."""
        with self._lock:
            return self._latest
