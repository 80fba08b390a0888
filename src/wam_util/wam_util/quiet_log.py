"""A node logger for conditions that recur every tick or frame: the first occurrence of
each key at once, then at most one line per second per key with the count since the
last line (``wam_core.common.log_throttle``)."""

from __future__ import annotations

from wam_core.common.log_throttle import ReasonThrottle


class QuietLog:
    def __init__(self, logger, interval_s: float = 1.0):
        self.logger = logger
        self.throttle = ReasonThrottle(interval_s)

    def warning(self, key: str, text: str) -> None:
        suffix = self.throttle.note(key)
        if suffix is not None:
            self.logger.warning(text + suffix)

    def error(self, key: str, text: str) -> None:
        suffix = self.throttle.note(key)
        if suffix is not None:
            self.logger.error(text + suffix)
