"""Asking another expert node which release it serves (its ``switch_release`` status).

A restarted node comes back with the release its parameters name; the node that kept
running knows the release the robot was switched to since. The world expert asks each
robot's action expert, an action expert the world expert, an action-expert instance the
peer that drives its robot.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from wam_interfaces.srv import SwitchRelease

# an rclpy future never completes when the server dies (or its answer is lost): a
# question not answered within this long is withdrawn and may be asked again
ANSWER_TIMEOUT_S = 3.0


class ReleaseQuestion:
    """One status question at a time on ``client``; ``robot``: of a world expert, the
    release it encodes that robot with."""

    def __init__(self, client, robot: str | None = None, timeout_s: float = ANSWER_TIMEOUT_S):
        self.client = client
        self.robot = robot
        self.timeout_s = timeout_s
        self._future = None
        self._sent = 0.0

    @property
    def in_flight(self) -> bool:
        return self._future is not None

    def ask(self, on_answer: Callable[[SwitchRelease.Response], None]) -> bool:
        """Send the question unless one is in flight or the service is not there; a
        question unanswered for ``timeout_s`` is withdrawn first. ``on_answer`` runs on
        the executor with the response. True: a question is in flight."""
        now = time.monotonic()
        if self._future is not None:
            if now - self._sent < self.timeout_s:
                return True
            self.client.remove_pending_request(self._future)
            self._future = None
        if not self.client.service_is_ready():
            return False
        req = SwitchRelease.Request(
            phase='status', robots=[] if self.robot is None else [self.robot]
        )
        future = self.client.call_async(req)
        self._future, self._sent = future, now

        def done(f) -> None:
            if f is not self._future:
                return  # withdrawn
            self._future = None
            try:
                res = f.result()
            except Exception:  # the call failed: asked again by the caller
                return
            if res is not None:
                on_answer(res)

        future.add_done_callback(done)
        return True
